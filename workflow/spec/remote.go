package spec

import (
	"sort"
	"strconv"
	"strings"
)

// The helpers in this file let a caller that knows the servers' tool lists
// (agentctl check --remote) check a workflow against them and report each
// problem at the node of the file at fault.

// PathStep is one step of a template path after tasks.<id>.output: a key,
// or a list index when IsIndex.
type PathStep struct {
	Key     string
	Index   int
	IsIndex bool
}

// String writes the step as a template does: .key, ["odd key"] or [n].
func (s PathStep) String() string {
	return segment{key: s.Key, index: s.Index, isIdx: s.IsIndex}.String()
}

// OutputRef is one template naming a task's output, with where it is
// written, so that a checker knowing the tool's outputSchema can say the
// path cannot be produced.
type OutputRef struct {
	Field     string // e.g. spec.tasks[1].with.arguments.id or spec.outputs.title
	Line, Col int    // of the template (of the string holding it when not found on its line)
	Text      string // the template as written, ${{ ... }}
	Task      string // the task whose output it names
	Path      []PathStep
}

// OutputRefs lists every template of with.arguments and outputs that names
// a task's output, in file order. Strings that do not parse are skipped:
// Parse has reported them.
func (w *Workflow) OutputRefs() []OutputRef {
	var refs []OutputRef
	var walk func(field string, v any)
	walk = func(field string, v any) {
		switch x := v.(type) {
		case string:
			parts, err := scanTemplates(x)
			if err != nil {
				return
			}
			line, col := w.Position(field)
			for _, p := range parts {
				if p.ref == nil || p.ref.root != "tasks" {
					continue
				}
				col := w.templateCol(line, col, p.ref.text)
				steps := make([]PathStep, len(p.ref.path))
				for i, g := range p.ref.path {
					steps[i] = PathStep{Key: g.key, Index: g.index, IsIndex: g.isIdx}
				}
				refs = append(refs, OutputRef{Field: field, Line: line, Col: col, Text: p.ref.text, Task: p.ref.name, Path: steps})
			}
		case map[string]any:
			for _, k := range sortedKeys(x) {
				walk(joinPath(field, k), x[k])
			}
		case []any:
			for i, e := range x {
				walk(indexPath(field, i), e)
			}
		}
	}
	for i, t := range w.Spec.Tasks {
		walk(TaskField(i, "with.arguments"), t.With.Arguments)
	}
	walk("spec.outputs", w.Spec.Outputs)
	sort.SliceStable(refs, func(i, j int) bool {
		if refs[i].Line != refs[j].Line {
			return refs[i].Line < refs[j].Line
		}
		return refs[i].Col < refs[j].Col
	})
	return refs
}

// TaskField is the field path of sub (e.g. "with.tool") in the i-th task.
func TaskField(i int, sub string) string {
	return indexPath("spec.tasks", i) + "." + sub
}

// Position returns the line and column of the field at path, or of its
// nearest ancestor written in the file (1:1 when none is).
func (w *Workflow) Position(path string) (line, col int) {
	p := (&checker{w: w}).at(path)
	return p.line, p.col
}

// StaticArguments returns the i-th task's arguments as far as they are
// known before the run: strings without a template as they will be sent
// ($${{ unescaped), strings holding a template kept as written, and the
// JSON Pointers (RFC 6901) of those templated strings, whose values are
// known only at run time.
func (w *Workflow) StaticArguments(i int) (args map[string]any, templated []string) {
	var walk func(ptr string, v any) any
	walk = func(ptr string, v any) any {
		switch x := v.(type) {
		case string:
			parts, err := scanTemplates(x)
			if err != nil {
				templated = append(templated, ptr)
				return x
			}
			var b strings.Builder
			for _, p := range parts {
				if p.ref != nil {
					templated = append(templated, ptr)
					return x
				}
				b.WriteString(p.text)
			}
			return b.String()
		case map[string]any:
			m := make(map[string]any, len(x))
			for _, k := range sortedKeys(x) {
				m[k] = walk(ptr+"/"+pointerEscape(k), x[k])
			}
			return m
		case []any:
			s := make([]any, len(x))
			for j, e := range x {
				s[j] = walk(ptr+"/"+strconv.Itoa(j), e)
			}
			return s
		}
		return v
	}
	args = map[string]any{}
	if i < 0 || i >= len(w.Spec.Tasks) {
		return args, nil
	}
	if a, ok := walk("", w.Spec.Tasks[i].With.Arguments).(map[string]any); ok {
		args = a
	}
	return args, templated
}

// ArgumentField returns the field path of the value at JSON Pointer ptr in
// the i-th task's arguments ("" or "/" is the arguments themselves).
func (w *Workflow) ArgumentField(i int, ptr string) string {
	field := TaskField(i, "with.arguments")
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if n, err := strconv.Atoi(tok); err == nil && n >= 0 && strconv.Itoa(n) == tok {
			// An index in an array, or a key made of digits: the file says which.
			if idx := indexPath(field, n); w.written(idx) {
				field = idx
				continue
			}
		}
		field = joinPath(field, tok)
	}
	return field
}

// written reports whether the field at path is in the file.
func (w *Workflow) written(path string) bool {
	_, ok := w.pos.val[path]
	return ok
}

func pointerEscape(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

// Closest returns the candidate nearest to name by edit distance, or ""
// when none is near enough to be a likely misspelling: at most a third of
// the name's length away (one step for names of 3 to 5 bytes; names
// shorter than 3 only match ignoring case).
func Closest(name string, candidates []string) string {
	best, bestD := "", -1
	limit := len(name) / 3
	if limit < 1 && len(name) >= 3 {
		limit = 1
	}
	for _, c := range candidates {
		if c == name {
			continue
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if d <= limit && (bestD < 0 || d < bestD || d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the optimal string alignment distance between a and b,
// in bytes: insertions, deletions, substitutions and transpositions of
// two adjacent bytes ("gte" is one step from "get") each cost 1.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
