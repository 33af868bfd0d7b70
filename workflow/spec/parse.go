package spec

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// MaxFileBytes is the largest workflow file Load and Parse accept (1 MiB).
const MaxFileBytes = 1 << 20

// Load reads the workflow file at path and parses it with Parse. Files larger
// than MaxFileBytes are refused before they are parsed.
func Load(path string) (*Workflow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load workflow: %w", err)
	}
	defer f.Close()
	src, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("load workflow %s: %w", path, err)
	}
	if len(src) > MaxFileBytes {
		return nil, fmt.Errorf("load workflow %s: file is larger than %d bytes (1 MiB); refusing to parse it", path, MaxFileBytes)
	}
	return Parse(path, src)
}

// Parse decodes src as a workflow file and checks it. file names the source
// in diagnostics. When anything is wrong, Parse returns a nil workflow and a
// *Diagnostics listing every problem found, each with its line and column.
func Parse(file string, src []byte) (w *Workflow, err error) {
	sum := sha256.Sum256(src)
	w = &Workflow{File: file, Source: src, Digest: "sha256:" + hex.EncodeToString(sum[:])}
	d := newDecoder(file)
	defer func() {
		// Defence in depth: a bug in the decoder or the checks must surface as
		// a diagnostic, never as a panic in the caller.
		if r := recover(); r != nil {
			w, err = nil, &Diagnostics{{File: file, Line: 1, Col: 1, Message: fmt.Sprintf("internal error while checking the file: %v", r)}}
		}
	}()
	if len(src) > MaxFileBytes {
		d.add(1, 1, "", false, "file is larger than %d bytes (1 MiB)", MaxFileBytes)
	} else if root := d.parseYAML(src); root != nil {
		d.decode(root, rvOf(w), "")
		w.pos = d.pos
		d.diags = append(d.diags, check(w, d.bad)...)
	}
	if len(d.diags) == 0 {
		return w, nil
	}
	ds := d.diags
	ds.sort()
	ds = ds.dedupe()
	return nil, &ds
}

// As lets errors.As find the diagnostics with a target of type *Diagnostics
// as well as **Diagnostics.
func (ds *Diagnostics) As(target any) bool {
	if t, ok := target.(*Diagnostics); ok && ds != nil {
		*t = *ds
		return true
	}
	return false
}

var yamlLineRe = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// parserProblems are the yaml.v3 parser's messages; see yamlError.
var parserProblems = []string{
	"did not find expected node content",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected <document start>",
}

// parseYAML turns src into the root mapping node, or records why it cannot.
func (d *decoder) parseYAML(src []byte) (root *yaml.Node) {
	defer func() {
		if r := recover(); r != nil {
			d.add(1, 1, "", false, "YAML parser failed: %v", r)
			root = nil
		}
	}()
	if len(bytes.TrimSpace(src)) == 0 {
		d.add(1, 1, "", false, "empty file: expected %s", d.expect)
		return nil
	}
	if line, col, ok := badByte(src); ok {
		d.add(line, col, "", false, "invalid character: the file must be UTF-8 text without control characters")
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.add(1, 1, "", false, "empty file: expected %s", d.expect)
			return nil
		}
		d.yamlError(src, err)
		return nil
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.yamlError(src, err)
		return nil
	default:
		d.add(next.Line, next.Column, "", false, "a second YAML document starts here; a workflow file holds exactly one")
		return nil
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		d.add(1, 1, "", false, "empty file: expected %s", d.expect)
		return nil
	}
	n := doc.Content[0]
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		if isNull(n) {
			d.add(n.Line, n.Column, "", false, "empty document: expected %s", d.expect)
		} else {
			d.add(n.Line, n.Column, "", false, "expected %s; got %s", d.expect, describe(n))
		}
		return nil
	}
	return n
}

// yamlError records a YAML syntax error at its line. A tab in indentation is
// the most common cause and the parser's message for it is obscure, so tabs
// are reported by name instead.
func (d *decoder) yamlError(src []byte, err error) {
	if tabs := tabIndents(src); len(tabs) > 0 {
		for _, p := range tabs {
			d.add(p[0], p[1], "", false, "tab character in indentation; YAML indentation must use spaces")
		}
		return
	}
	msg := err.Error()
	line := 1
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = m[2]
		// yaml.v3 reports parser (not scanner) errors with a 0-based line:
		// the line where the enclosing block or flow collection starts.
		for _, p := range parserProblems {
			if msg == p {
				line++
				break
			}
		}
	} else if len(msg) > 6 && msg[:6] == "yaml: " {
		msg = msg[6:]
	}
	d.add(line, 1, "", false, "YAML syntax error: %s", msg)
}

// tabIndents returns the line and column of each tab in leading whitespace.
func tabIndents(src []byte) [][2]int {
	var out [][2]int
	for i, line := range bytes.Split(src, []byte("\n")) {
		for j, c := range line {
			if c == '\t' {
				out = append(out, [2]int{i + 1, j + 1})
				break
			}
			if c != ' ' {
				break
			}
		}
	}
	return out
}

// badByte finds the first byte YAML cannot carry: invalid UTF-8 or a C0
// control character other than tab, newline and carriage return.
func badByte(src []byte) (line, col int, ok bool) {
	line, col = 1, 1
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		if (r == utf8.RuneError && size <= 1) || (r < 0x20 && r != '\t' && r != '\n' && r != '\r') || r == 0x7f || r == 0xfeff && i > 0 {
			return line, col, true
		}
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
		i += size
	}
	return 0, 0, false
}
