package vocab

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/jsonscan"
)

// DecodeRunCreated is Decode[RunCreated] for a run.created read from the
// log: a worker's claim reads one per queued run, and encoding/json's
// reflection over its members (the workflow source, the inputs) was the
// largest share of the claim's own CPU. A payload written as
// encoding/json writes it (its members by their names, each once) is read
// by one scan, exactly as encoding/json would read it; any other goes to
// encoding/json, with its errors. An event this process appended is
// decoded faster by Decode, which copies the appended value.
func DecodeRunCreated(e events.Event) (RunCreated, error) {
	p, err := e.Plaintext()
	if err != nil {
		return RunCreated{}, err
	}
	if rc, ok := scanRunCreated(p); ok {
		return rc, nil
	}
	var rc RunCreated
	err = e.Decode(&rc)
	return rc, err
}

// scanRunCreated reads a run.created payload; ok is false for anything it
// does not read exactly as encoding/json would (a member RunCreated lacks
// or spelled otherwise, a repeated one, null, a value of another kind).
func scanRunCreated(p string) (rc RunCreated, ok bool) {
	if !utf8.ValidString(p) { // encoding/json would rewrite the bytes
		return rc, false
	}
	i := jsonscan.SkipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return rc, false
	}
	var seen uint16
	for i++; ; {
		i = jsonscan.SkipSpace(p, i)
		if len(p) > i && p[i] == '}' && seen == 0 { // {}
			return rc, jsonscan.SkipSpace(p, i+1) == len(p)
		}
		key, j, ok := jsonscan.PlainString(p, i)
		if !ok {
			return rc, false
		}
		i = jsonscan.SkipSpace(p, j)
		if i >= len(p) || p[i] != ':' {
			return rc, false
		}
		if i, ok = runCreatedMember(&rc, key, &seen, p, jsonscan.SkipSpace(p, i+1)); !ok {
			return rc, false
		}
		i = jsonscan.SkipSpace(p, i)
		if i >= len(p) {
			return rc, false
		}
		switch p[i] {
		case ',':
			i++
		case '}':
			return rc, jsonscan.SkipSpace(p, i+1) == len(p)
		default:
			return rc, false
		}
	}
}

// runCreatedMember reads the value at p[i:] of member key into rc, and
// where it ends.
func runCreatedMember(rc *RunCreated, key string, seen *uint16, p string, i int) (int, bool) {
	bit, str := runCreatedString(rc, key)
	if bit == 0 {
		switch key {
		case "inputs":
			bit = 1 << 12
		case "servers":
			bit = 1 << 13
		case "queued":
			bit = 1 << 14
		default:
			return i, false
		}
	}
	if *seen&bit != 0 {
		return i, false
	}
	*seen |= bit
	if str != nil {
		return scanString(str, p, i)
	}
	switch {
	case key == "queued" && strings.HasPrefix(p[i:], "true"):
		rc.Queued = true
		return i + 4, true // the caller checks what follows
	case key == "queued" && strings.HasPrefix(p[i:], "false"):
		return i + 5, true
	case key == "inputs" && strings.HasPrefix(p[i:], "{}"):
		rc.Inputs = map[string]any{}
		return i + 2, true
	case key == "servers":
		if m, j, ok := plainStringMap(p, i); ok {
			rc.Servers = m
			return j, true
		}
	}
	j, ok := jsonscan.SkipValue(p, i) // checked: one valid JSON value
	if !ok {
		return i, false
	}
	raw := strings.TrimRight(p[i:j], " \t\r\n")
	switch key {
	case "queued":
		if raw != "true" && raw != "false" {
			return i, false
		}
		rc.Queued = raw == "true"
	case "inputs":
		if raw == "{}" {
			rc.Inputs = map[string]any{}
		} else if raw[0] != '{' || json.Unmarshal([]byte(raw), &rc.Inputs) != nil {
			return i, false
		}
	default: // servers
		if raw[0] != '{' || json.Unmarshal([]byte(raw), &rc.Servers) != nil {
			return i, false
		}
	}
	return j, true
}

// plainStringMap reads the JSON object at p[i] whose members are all
// plain strings (jsonscan.PlainString, names and values), as
// encoding/json would into a map[string]string; ok is false for any other.
func plainStringMap(p string, i int) (map[string]string, int, bool) {
	if i >= len(p) || p[i] != '{' {
		return nil, i, false
	}
	m := map[string]string{}
	j := jsonscan.SkipSpace(p, i+1)
	if j < len(p) && p[j] == '}' {
		return m, j + 1, true
	}
	for {
		k, e, ok := jsonscan.PlainString(p, j)
		if !ok {
			return nil, i, false
		}
		if e = jsonscan.SkipSpace(p, e); e >= len(p) || p[e] != ':' {
			return nil, i, false
		}
		v, e, ok := jsonscan.PlainString(p, jsonscan.SkipSpace(p, e+1))
		if !ok {
			return nil, i, false
		}
		m[k] = v // a repeated name: the last wins, as in encoding/json
		if j = jsonscan.SkipSpace(p, e); j >= len(p) {
			return nil, i, false
		}
		switch p[j] {
		case ',':
			j = jsonscan.SkipSpace(p, j+1)
		case '}':
			return m, j + 1, true
		default:
			return nil, i, false
		}
	}
}

// runCreatedString is where a string member of RunCreated goes, and the
// bit that tells a repeated one apart (0: not a string member).
func runCreatedString(rc *RunCreated, key string) (uint16, *string) {
	switch key {
	case "runId":
		return 1 << 0, &rc.RunID
	case "workflow":
		return 1 << 1, &rc.Workflow
	case "file":
		return 1 << 2, &rc.File
	case "digest":
		return 1 << 3, &rc.Digest
	case "source":
		return 1 << 4, &rc.Source
	case "mode":
		return 1 << 5, &rc.Mode
	case "sourceRunId":
		return 1 << 6, &rc.SourceRunID
	case "command":
		return 1 << 7, &rc.Command
	case "traceParent":
		return 1 << 8, &rc.TraceParent
	case "traceState":
		return 1 << 9, &rc.TraceState
	}
	return 0, nil
}

// scanString reads the JSON string at p[i] into dst: a plain one as it
// is, one with the escapes of a workflow source (newlines, quotes, tabs)
// by unescape, one with any other (\u) by encoding/json, the string alone.
func scanString(dst *string, p string, i int) (int, bool) {
	if s, j, ok := jsonscan.PlainString(p, i); ok {
		*dst = s // a part of the payload, which is immutable
		return j, true
	}
	if i >= len(p) || p[i] != '"' {
		return i, false
	}
	if s, j, ok := unescape(p, i); ok {
		*dst = s
		return j, true
	}
	j, ok := jsonscan.SkipValue(p, i)
	if !ok {
		return i, false
	}
	raw := strings.TrimRight(p[i:j], " \t\r\n")
	if json.Unmarshal([]byte(raw), dst) != nil {
		return i, false
	}
	return j, true
}

// unescape reads the JSON string at p[i] (p valid UTF-8) whose escapes are
// all one of \" \\ \/ \b \f \n \r \t, decoding them as encoding/json
// does; ok is false for a \u escape (surrogates are encoding/json's to
// judge), a control byte, or no closing quote.
func unescape(p string, i int) (s string, end int, ok bool) {
	var b strings.Builder
	b.Grow(len(p) - i)
	from := i + 1
	for j := i + 1; j < len(p); j++ {
		c := p[j]
		switch {
		case c == '"':
			b.WriteString(p[from:j])
			return b.String(), j + 1, true
		case c < 0x20:
			return "", i, false
		case c != '\\':
			continue
		}
		if j+1 >= len(p) {
			return "", i, false
		}
		b.WriteString(p[from:j])
		r := simpleEscapes[p[j+1]]
		if r == 0 {
			return "", i, false
		}
		b.WriteByte(r)
		j++
		from = j + 1
	}
	return "", i, false
}

// simpleEscapes are the JSON escapes unescape decodes, by the byte after
// the backslash (0: not one).
var simpleEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
