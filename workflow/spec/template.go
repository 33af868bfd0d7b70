package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Templates
//
// A string in with.arguments or outputs may contain templates:
//
//	${{ inputs.<name><path> }}
//	${{ tasks.<id>.output<path> }}
//
// where <path> is zero or more of .key, [n] (a list index) and ["key"] (a key
// that is not an identifier). A string that is exactly one template, with no
// text around it, takes the JSON type of the value it names; a template
// inside a longer string is replaced by the value's text: strings as they
// are, anything else as compact JSON. "$${{" stands for a literal "${{".

// Scope holds the values templates can name.
type Scope struct {
	Inputs map[string]any // resolved inputs by name
	Tasks  map[string]any // task id → output of the finished task
	// TaskOutput, when set, is asked instead of Tasks: a run whose tasks
	// finish while others render reads its outputs under its own lock
	// rather than copying them all for every task it starts.
	TaskOutput func(id string) (any, bool)
}

// task is the output of the finished task id.
func (s Scope) task(id string) (any, bool) {
	if s.TaskOutput != nil {
		return s.TaskOutput(id)
	}
	v, ok := s.Tasks[id]
	return v, ok
}

// Render returns a deep copy of v (maps, slices and strings) with every
// template replaced by its value in s. A template naming something absent is
// an error that names the template and the missing key.
func Render(v any, s Scope) (any, error) {
	return renderTree("", v, s, func(_ string, _ *tref, err error) error { return err })
}

// renderTree is Render's walk: field is v's path in the workflow
// (joinPath, indexPath), and fail turns a string's rendering error, with
// the template that failed (nil when the string does not parse), into
// the error returned.
func renderTree(field string, v any, s Scope, fail func(field string, ref *tref, err error) error) (any, error) {
	switch x := v.(type) {
	case string:
		out, ref, err := renderStringRef(x, s)
		if err != nil {
			return nil, fail(field, ref, err)
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range sortedKeys(x) {
			r, err := renderTree(joinPath(field, k), x[k], s, fail)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := renderTree(indexPath(field, i), e, s, fail)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	}
	return v, nil
}

// renderStringRef renders one string and also returns the template that
// failed to resolve (nil when the string itself does not parse).
func renderStringRef(str string, s Scope) (any, *tref, error) {
	parts, err := scanTemplates(str)
	if err != nil {
		return nil, nil, err
	}
	if len(parts) == 1 && parts[0].ref != nil {
		v, err := parts[0].ref.resolve(s)
		if err != nil {
			return nil, parts[0].ref, err
		}
		return v, nil, nil
	}
	var b strings.Builder
	for _, p := range parts {
		if p.ref == nil {
			b.WriteString(p.text)
			continue
		}
		v, err := p.ref.resolve(s)
		if err != nil {
			return nil, p.ref, err
		}
		b.WriteString(stringify(v))
	}
	return b.String(), nil, nil
}

// stringify renders a value inside a larger string.
func stringify(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// segment is one step of a template path: a key or a list index.
type segment struct {
	key   string
	index int
	isIdx bool
}

func (g segment) String() string {
	if g.isIdx {
		return "[" + strconv.Itoa(g.index) + "]"
	}
	if isIdent(g.key) {
		return "." + g.key
	}
	return "[" + strconv.Quote(g.key) + "]"
}

// tref is one parsed template.
type tref struct {
	text string    // the template as written, "${{ ... }}"
	root string    // "inputs" or "tasks"
	name string    // input name or task id
	path []segment // after inputs.<name> or tasks.<id>.output
}

// base is the part of the template that names the input or task output.
func (r *tref) base() string {
	if r.root == "inputs" {
		return "inputs" + segment{key: r.name}.String()
	}
	return "tasks" + segment{key: r.name}.String() + ".output"
}

func (r *tref) resolve(s Scope) (any, error) {
	var v any
	var ok bool
	if r.root == "inputs" {
		v, ok = s.Inputs[r.name]
		if !ok {
			return nil, fmt.Errorf("template %q: input %q is not set", r.text, r.name)
		}
	} else {
		v, ok = s.task(r.name)
		if !ok {
			return nil, fmt.Errorf("template %q: task %q has no output (it has not finished)", r.text, r.name)
		}
	}
	at := r.base()
	for _, g := range r.path {
		next, err := step(v, g, at)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", r.text, err)
		}
		v, at = next, at+g.String()
	}
	return v, nil
}

// step takes one path segment into v; at names v in errors.
func step(v any, g segment, at string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		if g.isIdx {
			return nil, fmt.Errorf("%s is an object; cannot index it with %s", at, g)
		}
		e, ok := x[g.key]
		if !ok {
			return nil, fmt.Errorf("key %q not found in %s (keys: %s)", g.key, at, strings.Join(sortedKeys(x), ", "))
		}
		return e, nil
	case []any:
		if !g.isIdx {
			return nil, fmt.Errorf("%s is a list; cannot take key %q (use [n])", at, g.key)
		}
		if g.index >= len(x) {
			return nil, fmt.Errorf("%s has no index %d (length %d)", at, g.index, len(x))
		}
		return x[g.index], nil
	case nil:
		return nil, fmt.Errorf("%s is null; cannot take %s", at, g)
	}
	// Other maps and slices (typed Go values) by reflection.
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String && !g.isIdx:
		e := rv.MapIndex(reflect.ValueOf(g.key).Convert(rv.Type().Key()))
		if !e.IsValid() {
			return nil, fmt.Errorf("key %q not found in %s", g.key, at)
		}
		return e.Interface(), nil
	case (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array) && g.isIdx:
		if g.index >= rv.Len() {
			return nil, fmt.Errorf("%s has no index %d (length %d)", at, g.index, rv.Len())
		}
		return rv.Index(g.index).Interface(), nil
	}
	return nil, fmt.Errorf("%s is %s; cannot take %s", at, jsonType(v), g)
}

// part is literal text or one template of a scanned string.
type part struct {
	text string
	ref  *tref
}

// scanTemplates splits s into literal text and templates.
func scanTemplates(s string) ([]part, error) {
	var parts []part
	var lit strings.Builder
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "$${{") {
			lit.WriteString("${{")
			i += 4
			continue
		}
		if !strings.HasPrefix(s[i:], "${{") {
			lit.WriteByte(s[i])
			i++
			continue
		}
		end := templateEnd(s[i+3:])
		if end < 0 {
			return nil, fmt.Errorf("template %s is not closed with }}", quoteShort(s[i:]))
		}
		text := s[i : i+3+end+2]
		ref, err := parseRef(text, strings.TrimSpace(s[i+3:i+3+end]))
		if err != nil {
			return nil, err
		}
		if lit.Len() > 0 {
			parts = append(parts, part{text: lit.String()})
			lit.Reset()
		}
		parts = append(parts, part{ref: ref})
		i += len(text)
	}
	if lit.Len() > 0 || len(parts) == 0 {
		parts = append(parts, part{text: lit.String()})
	}
	return parts, nil
}

// parseRef parses the expression inside ${{ }}.
func parseRef(text, expr string) (*tref, error) {
	bad := func(format string, args ...any) (*tref, error) {
		return nil, fmt.Errorf("template %q: %s", text, fmt.Sprintf(format, args...))
	}
	if expr == "" {
		return bad("empty expression; want inputs.<name> or tasks.<id>.output")
	}
	segs, err := parsePath(expr)
	if err != nil {
		return bad("%v", err)
	}
	r := &tref{text: text}
	first := segs[0]
	switch {
	case first.isIdx || (first.key != "inputs" && first.key != "tasks"):
		return bad("unknown name %s; a template starts with inputs. or tasks.", strings.TrimPrefix(first.String(), "."))
	case first.key == "inputs":
		if len(segs) < 2 || segs[1].isIdx {
			return bad("want inputs.<name>")
		}
		r.root, r.name, r.path = "inputs", segs[1].key, segs[2:]
	default:
		if len(segs) < 3 || segs[1].isIdx || segs[2].isIdx || segs[2].key != "output" {
			return bad("want tasks.<id>.output")
		}
		r.root, r.name, r.path = "tasks", segs[1].key, segs[3:]
	}
	return r, nil
}

// parsePath parses name(.key | [n] | ["key"])* into segments.
func parsePath(expr string) ([]segment, error) {
	var segs []segment
	i := 0
	ident := func() (string, error) {
		j := i
		for j < len(expr) && (isIdentByte(expr[j]) || (j > i && (expr[j] == '-' || '0' <= expr[j] && expr[j] <= '9'))) {
			j++
		}
		if j == i {
			if i >= len(expr) {
				return "", fmt.Errorf("expression ends where a name was expected")
			}
			return "", fmt.Errorf("unexpected %q at offset %d", expr[i], i)
		}
		s := expr[i:j]
		i = j
		return s, nil
	}
	name, err := ident()
	if err != nil {
		return nil, err
	}
	segs = append(segs, segment{key: name})
	for i < len(expr) {
		switch expr[i] {
		case '.':
			i++
			k, err := ident()
			if err != nil {
				return nil, err
			}
			segs = append(segs, segment{key: k})
		case '[':
			if i+1 < len(expr) && expr[i+1] == '"' {
				// A quoted key ends at its closing quote, so it may hold ] or }}.
				q := closingQuote(expr, i+1)
				if q < 0 {
					return nil, fmt.Errorf("bad quoted key %s: no closing quote", expr[i+1:])
				}
				inner := expr[i+1 : q+1]
				if q+1 >= len(expr) || expr[q+1] != ']' {
					return nil, fmt.Errorf("quoted key %s is not followed by ]", inner)
				}
				k, err := strconv.Unquote(inner)
				if err != nil {
					return nil, fmt.Errorf("bad quoted key %s", inner)
				}
				segs = append(segs, segment{key: k})
				i = q + 2
				continue
			}
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("[ without ]")
			}
			inner := expr[i+1 : i+end]
			n, err := strconv.Atoi(inner)
			if err != nil || n < 0 || strings.HasPrefix(inner, "+") {
				return nil, fmt.Errorf("index [%s] is not a non-negative integer", inner)
			}
			segs = append(segs, segment{index: n, isIdx: true})
			i += end + 1
		default:
			return nil, fmt.Errorf("unexpected %q at offset %d", expr[i], i)
		}
	}
	return segs, nil
}

// closingQuote returns the index of the quote that closes the Go-style
// quoted string opening at s[open], or -1; backslash escapes the next byte.
func closingQuote(s string, open int) int {
	for j := open + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// templateEnd returns the offset of the }} that closes a template whose
// expression starts at s[0], skipping quoted keys (which may contain }}),
// or -1.
func templateEnd(s string) int {
	for j := 0; j < len(s); j++ {
		switch {
		case s[j] == '"':
			q := closingQuote(s, j)
			if q < 0 { // unterminated: parsing reports it
				if k := strings.Index(s[j:], "}}"); k >= 0 {
					return j + k
				}
				return -1
			}
			j = q
		case strings.HasPrefix(s[j:], "}}"):
			return j
		}
	}
	return -1
}

func isIdentByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// templateRefs returns every template in the strings of v (deeply).
func templateRefs(v any) ([]*tref, error) {
	var refs []*tref
	var err error
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			parts, e := scanTemplates(x)
			if e != nil && err == nil {
				err = e
			}
			for _, p := range parts {
				if p.ref != nil {
					refs = append(refs, p.ref)
				}
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(x[k])
			}
		case []any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return refs, err
}

// jsonType names the JSON type of a Go value: string, number, integer,
// boolean, object, array or null.
func jsonType(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return "integer"
	case float32:
		return numberType(float64(x))
	case float64:
		return numberType(x)
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "integer"
		}
		if f, err := x.Float64(); err == nil {
			return numberType(f)
		}
		return "number"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	}
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map, reflect.Struct:
		return "object"
	case reflect.Slice, reflect.Array:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

func numberType(f float64) string {
	if f == math.Trunc(f) && !math.IsInf(f, 0) {
		return "integer"
	}
	return "number"
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40] + "…"
	}
	return strconv.Quote(s)
}
