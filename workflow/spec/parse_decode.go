package spec

import (
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The decoder walks yaml.Node trees into the spec types by reflection, using
// the yaml struct tags, so that every problem is reported with the line and
// column of the node at fault and decoding goes on after the first problem.

// maxNodes bounds the nodes visited, aliases expanded, so that a small file
// full of nested aliases ("billion laughs") cannot exhaust memory.
const maxNodes = 50_000

// pos is a 1-based line and column in the source.
type pos struct{ line, col int }

// positions maps field paths (spec.tasks[0].with.server) to where they are.
type positions struct {
	val map[string]pos // the value node
	key map[string]pos // the key node, for fields of mappings
}

type decoder struct {
	file  string
	diags Diagnostics
	pos   positions
	bad   map[string]bool // paths whose value could not be decoded
	nodes int
	// active holds the nodes being decoded, from the root down: a recursive
	// alias shows up as a node that is already active.
	active map[*yaml.Node]bool
	// expect says what the document should be, for messages about its root.
	expect string
}

func newDecoder(file string) *decoder {
	return &decoder{
		file: file,
		pos:  positions{val: map[string]pos{}, key: map[string]pos{}},
		bad:  map[string]bool{},

		active: map[*yaml.Node]bool{},

		expect: "a Workflow document: a mapping with apiVersion, kind, metadata and spec",
	}
}

func (d *decoder) add(line, col int, field string, policy bool, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{File: d.file, Line: line, Col: col, Field: field, Message: fmt.Sprintf(format, args...), Policy: policy})
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.bad[path] = true
	d.add(n.Line, n.Column, path, false, format, args...)
}

func rvOf(ptr any) reflect.Value { return reflect.ValueOf(ptr).Elem() }

var (
	secretRefType = reflect.TypeOf(SecretRefSpec{})
	envValueType  = reflect.TypeOf(EnvValueSpec{})
	taskSpecType  = reflect.TypeOf(TaskSpec{})
)

// maxDepth bounds nesting, so that paths and recursion stay small.
const maxDepth = 64

// visit resolves aliases, counts the node against the budget and records its
// position. It returns nil when decoding must stop; otherwise the caller must
// call d.leave(n) when done with the returned node.
func (d *decoder) visit(n *yaml.Node, path string) *yaml.Node {
	at := n
	for depth := 0; n.Kind == yaml.AliasNode; depth++ {
		if n.Alias == nil || depth > 100 {
			d.fail(at, path, "unresolvable YAML alias")
			return nil
		}
		n = n.Alias
	}
	if d.active[n] {
		d.fail(at, path, "YAML alias refers to a node that contains it (recursive alias)")
		return nil
	}
	if len(d.active) >= maxDepth {
		d.fail(at, path, "nested more than %d levels deep", maxDepth)
		return nil
	}
	d.nodes++
	if d.nodes == maxNodes {
		d.fail(at, path, "document too large: more than %d YAML nodes after expanding aliases", maxNodes)
	}
	if d.nodes >= maxNodes {
		return nil
	}
	if _, ok := d.pos.val[path]; !ok {
		d.pos.val[path] = pos{at.Line, at.Column}
	}
	d.active[n] = true
	return n
}

// leave ends the visit of n.
func (d *decoder) leave(n *yaml.Node) { delete(d.active, n) }

// decode stores the value of n into v, a settable value of a spec type.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	if n = d.visit(n, path); n == nil {
		return
	}
	defer d.leave(n)
	if isNull(n) {
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.fail(n, path, "expected a mapping, got %s", describe(n))
			return
		}
		m := reflect.MakeMap(v.Type())
		d.eachPair(n, path, func(key string, kn, vn *yaml.Node, p string) {
			ev := reflect.New(v.Type().Elem()).Elem()
			d.decode(vn, ev, p)
			m.SetMapIndex(reflect.ValueOf(key), ev)
		})
		v.Set(m)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, c := range n.Content {
			d.decode(c, s.Index(i), indexPath(path, i))
		}
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.leave(n) // the pointee is the same node
		d.decode(n, p.Elem(), path)
		v.Set(p)
	case reflect.Interface:
		d.leave(n) // toAny visits the same node again
		v.Set(reflect.ValueOf(d.toAny(n, path)))
	default:
		d.decodeScalar(n, v, path)
	}
}

func (d *decoder) decodeScalar(n *yaml.Node, v reflect.Value, path string) {
	switch v.Kind() {
	case reflect.String:
		if n.Kind == yaml.ScalarNode && (n.Tag == "!!str" || n.Tag == "!!timestamp") {
			v.SetString(n.Value)
			return
		}
		if n.Kind == yaml.ScalarNode && n.Tag != "!!binary" {
			d.fail(n, path, "expected a string, got %s (quote it to make it a string)", describe(n))
			return
		}
		d.fail(n, path, "expected a string, got %s", describe(n))
	case reflect.Int, reflect.Int64:
		var i int64
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(&i) != nil {
			d.fail(n, path, "expected an integer, got %s", describe(n))
			return
		}
		if v.OverflowInt(i) {
			d.fail(n, path, "integer %s is out of range", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		var f float64
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") || n.Decode(&f) != nil {
			d.fail(n, path, "expected a number, got %s", describe(n))
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" || n.Decode(&b) != nil {
			d.fail(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	default:
		d.fail(n, path, "cannot decode into %s", v.Type())
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	t := v.Type()
	if n.Kind != yaml.MappingNode {
		if t == envValueType {
			d.decodeScalar(n, v.FieldByName("Value"), path) // a literal value
			return
		}
		if t == secretRefType && strings.Contains(path, ".auth.") {
			d.fail(n, path, "must be a secret reference {env: NAME} or {file: PATH}, got a literal value (not shown: a secret written in a workflow file should be rotated)")
			return
		}
		if t == secretRefType {
			d.fail(n, path, "headers must be secret references {env: NAME} or {file: PATH}, got %s", describe(n))
			return
		}
		d.fail(n, path, "expected a mapping with keys %s, got %s", strings.Join(fieldNames(t), ", "), describe(n))
		return
	}
	if t == taskSpecType {
		v.FieldByName("Line").SetInt(int64(n.Line))
	}
	fields := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		if name := yamlName(t.Field(i)); name != "" {
			fields[name] = i
		}
	}
	d.eachPair(n, path, func(key string, kn, vn *yaml.Node, p string) {
		i, ok := fields[key]
		if !ok {
			where := "in " + path
			if path == "" {
				where = "at the top level"
			}
			msg := fmt.Sprintf("unknown key %q %s; allowed: %s", key, where, strings.Join(fieldNames(t), ", "))
			if s := suggest(key, fieldNames(t)); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			d.bad[p] = true
			d.add(kn.Line, kn.Column, p, false, "%s", msg)
			return
		}
		d.decode(vn, v.Field(i), p)
	})
}

// eachPair calls f for every key of mapping n whose key is a string and is
// not a repeat; bad keys and repeats are reported.
func (d *decoder) eachPair(n *yaml.Node, path string, f func(key string, kn, vn *yaml.Node, p string)) {
	seen := map[string]pos{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		if kn.Kind == yaml.AliasNode && kn.Alias != nil {
			kn = kn.Alias
		}
		if kn.Kind != yaml.ScalarNode {
			d.fail(kn, path, "mapping keys must be strings, got %s", describe(kn))
			continue
		}
		key := kn.Value
		p := joinPath(path, key)
		if kn.Tag == "!!merge" {
			d.fail(kn, p, "YAML merge keys (<<) are not supported; write the keys out")
			continue
		}
		if prev, dup := seen[key]; dup {
			d.fail(kn, p, "duplicate key %q (first defined at line %d)", key, prev.line)
			continue
		}
		seen[key] = pos{kn.Line, kn.Column}
		d.pos.key[p] = pos{kn.Line, kn.Column}
		f(key, kn, vn, p)
	}
}

// toAny converts a node to plain JSON-like Go values: map[string]any, []any,
// string, int, float64, bool and nil.
func (d *decoder) toAny(n *yaml.Node, path string) any {
	if n = d.visit(n, path); n == nil {
		return nil
	}
	defer d.leave(n)
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		d.eachPair(n, path, func(key string, kn, vn *yaml.Node, p string) {
			m[key] = d.toAny(vn, p)
		})
		return m
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			s[i] = d.toAny(c, indexPath(path, i))
		}
		return s
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return nil
		case "!!bool":
			var b bool
			if n.Decode(&b) == nil {
				return b
			}
		case "!!int":
			if i, err := strconv.ParseInt(n.Value, 10, 0); err == nil {
				return int(i) // the common case, without the reflection of Decode
			}
			var i int
			if n.Decode(&i) == nil {
				return i
			}
			var f float64
			if n.Decode(&f) == nil && !math.IsInf(f, 0) {
				return f
			}
		case "!!float":
			var f float64
			if n.Decode(&f) == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				return f
			}
			d.fail(n, path, "number %s cannot be represented in JSON", n.Value)
			return nil
		case "!!str", "!!timestamp", "!!binary":
			return n.Value
		default:
			d.fail(n, path, "unsupported YAML tag %s", n.Tag)
			return nil
		}
		d.fail(n, path, "cannot decode %s", describe(n))
		return nil
	}
	d.fail(n, path, "cannot decode %s", describe(n))
	return nil
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.Tag == "!!null"
}

// describe names the kind of a node for messages: `a string "x"`, `a list`.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "…"
		}
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "boolean " + v
		case "!!int":
			return "integer " + v
		case "!!float":
			return "number " + v
		case "!!str", "!!timestamp":
			return "string " + strconv.Quote(v)
		}
		return "a " + n.Tag + " value"
	}
	return "an unknown node"
}

func yamlName(f reflect.StructField) string {
	tag := f.Tag.Get("yaml")
	if tag == "" || tag == "-" {
		return ""
	}
	name, _, _ := strings.Cut(tag, ",")
	return name
}

// fieldNames lists the yaml keys of struct type t in declaration order.
func fieldNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if name := yamlName(t.Field(i)); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// suggest returns the allowed key that key probably meant: the same letters
// ignoring case, '_' and '-' (mcp_servers → mcpServers).
func suggest(key string, allowed []string) string {
	norm := func(s string) string {
		return strings.ToLower(strings.NewReplacer("_", "", "-", "").Replace(s))
	}
	for _, a := range allowed {
		if norm(a) == norm(key) {
			return a
		}
	}
	return ""
}

// indexPath appends a list index to a field path: a[3].
func indexPath(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// joinPath appends a mapping key to a field path: a.b, or a["odd key"].
func joinPath(path, key string) string {
	if !isIdent(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// isIdent reports whether s matches [A-Za-z_][A-Za-z0-9_-]*.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		case i > 0 && (c == '-' || '0' <= c && c <= '9'):
		default:
			return false
		}
	}
	return true
}
