package spec

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse and arbitrary strings to the
// template engine. Neither may panic; Parse must return exactly one of a
// workflow or diagnostics, each diagnostic with a position; a workflow that
// parsed must be usable (order, inputs, rendering) without panicking.
// Seeds: testdata/fuzz/FuzzParse plus the good, bad and example files.
func FuzzParse(f *testing.F) {
	for _, glob := range []string{"testdata/lang/good/*.yaml", "testdata/lang/bad/*.yaml", "../../examples/*.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, p := range files {
			if src, err := os.ReadFile(p); err == nil {
				f.Add(src, "${{ inputs.query }}")
			}
		}
	}
	f.Fuzz(func(t *testing.T, src []byte, tmpl string) {
		w, err := Parse("f.yaml", src)
		if (w == nil) == (err == nil) {
			t.Fatalf("Parse returned workflow %v and error %v", w != nil, err)
		}
		if err != nil {
			ds, ok := err.(*Diagnostics)
			if !ok || len(*ds) == 0 {
				t.Fatalf("error %T %v is not non-empty *Diagnostics", err, err)
			}
			for _, d := range *ds {
				if d.Line < 1 || d.Col < 1 {
					t.Fatalf("diagnostic without position: %s", d)
				}
			}
		} else {
			_ = w.Order()
			_ = w.TasksInOrder()
			in, _ := ResolveInputs(w, nil)
			s := Scope{Inputs: in, Tasks: map[string]any{}}
			for _, ts := range w.Spec.Tasks {
				_, _ = Render(ts.With.Arguments, s)
				s.Tasks[ts.ID] = map[string]any{"id": "x", "items": []any{1}}
			}
			_, _ = Render(w.Spec.Outputs, s)
		}
		scope := Scope{Inputs: map[string]any{"query": "q", "a": []any{map[string]any{"b": 1}}}, Tasks: map[string]any{"t": map[string]any{"x": nil}}}
		_, _ = Render(tmpl, scope)
		_, _ = Render(map[string]any{"k": []any{tmpl, tmpl + tmpl}}, scope)
		_, _ = templateRefs(tmpl)
		_, _, _ = ParseInputFlag(tmpl)
	})
}
