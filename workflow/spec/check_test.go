package spec

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// wf builds a workflow file around task definitions (YAML list items).
func wf(tasks string) string {
	return `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: t }
spec:
  policy: { network: { allowedSchemes: [http], allowPrivate: true } }
  mcpServers: { s: { url: "http://127.0.0.1:1/mcp" } }
  actions: { a: { kind: mcp.call } }
  tasks:
` + tasks
}

// task renders one task; needs is written only when non-nil.
func task(id string, needs []string, args string) string {
	s := fmt.Sprintf("    - id: %s\n      uses: action:a\n      with: { server: s, tool: t, arguments: {%s} }\n", id, args)
	if needs != nil {
		s += fmt.Sprintf("      needs: [%s]\n", strings.Join(needs, ", "))
	}
	return s
}

func mustParse(t *testing.T, src string) *Workflow {
	t.Helper()
	w, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatalf("Parse:\n%v\n--- source:\n%s", err, src)
	}
	return w
}

func TestWorkflow_Order(t *testing.T) {
	tests := []struct {
		name   string
		tasks  string
		order  []string
		levels [][]string
	}{
		{"implicit chain", task("a", nil, "") + task("b", nil, "") + task("c", nil, ""),
			[]string{"a", "b", "c"}, [][]string{{"a"}, {"b"}, {"c"}}},
		{"all independent", task("a", []string{}, "") + task("b", []string{}, "") + task("c", []string{}, ""),
			[]string{"a", "b", "c"}, [][]string{{"a", "b", "c"}}},
		{"needs a later task", task("a", []string{"c"}, "") + task("b", []string{}, "") + task("c", []string{}, ""),
			[]string{"b", "c", "a"}, [][]string{{"b", "c"}, {"a"}}},
		{"diamond", task("a", nil, "") + task("b", []string{"a"}, "") + task("c", []string{"a"}, "") + task("d", []string{"b", "c"}, ""),
			[]string{"a", "b", "c", "d"}, [][]string{{"a"}, {"b", "c"}, {"d"}}},
		{"implicit plus template", task("a", []string{}, "") + task("b", []string{}, "") + task("c", nil, `x: "${{ tasks.a.output }}"`),
			[]string{"a", "b", "c"}, [][]string{{"a", "b"}, {"c"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := mustParse(t, wf(tt.tasks))
			var ids []string
			for _, ts := range w.TasksInOrder() {
				ids = append(ids, ts.ID)
			}
			if !reflect.DeepEqual(ids, tt.order) {
				t.Errorf("TasksInOrder = %v, want %v", ids, tt.order)
			}
			if got := w.Order(); !reflect.DeepEqual(got, tt.levels) {
				t.Errorf("Order = %v, want %v", got, tt.levels)
			}
		})
	}
}

func TestWorkflow_Needs(t *testing.T) {
	w := mustParse(t, wf(task("a", nil, "")+task("b", []string{}, "")+task("c", nil, `x: "${{ tasks.a.output.v }}"`)))
	for id, want := range map[string][]string{"a": {}, "b": {}, "c": {"a", "b"}, "zz": nil} {
		if got := w.Needs(id); !reflect.DeepEqual(got, want) && !(len(got) == 0 && len(want) == 0 && want != nil) {
			t.Errorf("Needs(%s) = %v, want %v", id, got, want)
		}
	}
	// NeedsByIndex is every task's Needs at once, as indexes in file order.
	byIndex := w.NeedsByIndex()
	for i, ts := range w.Spec.Tasks {
		var ids []string
		for _, j := range byIndex[i] {
			ids = append(ids, w.Spec.Tasks[j].ID)
		}
		if want := w.Needs(ts.ID); !reflect.DeepEqual(ids, want) && !(len(ids) == 0 && len(want) == 0) {
			t.Errorf("NeedsByIndex()[%d] = %v, want Needs(%s) = %v", i, ids, ts.ID, want)
		}
	}
	if got := w.Action(w.Spec.Tasks[0]); got.Kind != "mcp.call" || got.Class() != "unknown" {
		t.Errorf("Action = %+v, class %s", got, got.Class())
	}
	if w.Spec.Tasks[1].Line != 12 {
		t.Errorf("task b Line = %d, want 12", w.Spec.Tasks[1].Line)
	}
}

func TestParse_NeedsCycles(t *testing.T) {
	tests := []struct {
		name  string
		tasks string
		want  []string
	}{
		{"self", task("a", []string{"a"}, ""), []string{`task "a" cannot need itself`}},
		{"two", task("a", []string{"b"}, "") + task("b", []string{"a"}, ""), []string{"needs cycle: a -> b -> a"}},
		{"implicit edge", task("a", []string{"b"}, "") + task("b", nil, ""), []string{"needs cycle: a -> b -> a"}},
		{"three, reported once", task("x", []string{}, "") + task("a", []string{"c"}, "") + task("b", []string{"a"}, "") + task("c", []string{"b"}, ""),
			[]string{"needs cycle: a -> c -> b -> a"}},
		{"two cycles", task("a", []string{"b"}, "") + task("b", []string{"a"}, "") + task("c", []string{"d"}, "") + task("d", []string{"c"}, ""),
			[]string{"needs cycle: a -> b -> a", "needs cycle: c -> d -> c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("t.yaml", []byte(wf(tt.tasks)))
			var ds Diagnostics
			if !errors.As(err, &ds) {
				t.Fatalf("err = %v, want Diagnostics", err)
			}
			if len(ds) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%v", len(ds), len(tt.want), err)
			}
			for i, w := range tt.want {
				if !strings.Contains(ds[i].Message, w) || !strings.HasSuffix(ds[i].Field, "needs") && !strings.Contains(ds[i].Field, "needs[") {
					t.Errorf("diagnostic %d = %s, want %q on a needs field", i, ds[i], w)
				}
			}
		})
	}
}

func TestParse_Good(t *testing.T) {
	files, _ := filepath.Glob("testdata/lang/good/*.yaml")
	examples, _ := filepath.Glob("../../examples/*.yaml")
	files = append(files, examples...)
	if len(examples) == 0 {
		t.Fatal("no examples/*.yaml")
	}
	for _, f := range files {
		w, err := Load(f)
		if err != nil {
			t.Errorf("%s:\n%v", f, err)
			continue
		}
		if !strings.HasPrefix(w.Digest, "sha256:") || len(w.Digest) != 71 || w.File != f {
			t.Errorf("%s: Digest %q File %q", f, w.Digest, w.File)
		}
	}
}

func TestLoad_Example(t *testing.T) {
	w, err := Load("../../examples/lookup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := w.Order(); !reflect.DeepEqual(got, [][]string{{"find"}, {"fetch"}, {"summarize"}}) {
		t.Errorf("Order = %v", got)
	}
	in, err := ResolveInputs(w, nil)
	if err != nil || in["query"] != "mcp" {
		t.Fatalf("ResolveInputs = %v, %v", in, err)
	}
	s := Scope{Inputs: in, Tasks: map[string]any{
		"find":      map[string]any{"id": "d1", "title": "T", "score": 1.0},
		"fetch":     map[string]any{"id": "d1", "title": "T", "body": "a b c"},
		"summarize": map[string]any{"words": 3, "steps": 3},
	}}
	args, err := Render(w.Spec.Tasks[2].With.Arguments, s)
	if err != nil || !reflect.DeepEqual(args, map[string]any{"text": "a b c", "steps": 3}) {
		t.Errorf("arguments = %#v, %v", args, err)
	}
	out, err := Render(w.Spec.Outputs, s)
	if err != nil || !reflect.DeepEqual(out, map[string]any{"title": "T", "words": 3}) {
		t.Errorf("outputs = %#v, %v", out, err)
	}
	if a := w.Action(w.Spec.Tasks[2]); a.Class() != IdempotencyIdempotent {
		t.Errorf("summarize idempotency = %q", a.Class())
	}
}

func TestLoad_TooLarge(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(path, make([]byte, MaxFileBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Load(big) = %v", err)
	}
}

func TestParse_NoInputsDeclared(t *testing.T) {
	// Without spec.inputs any input name may be used (docs/WORKFLOWS.md declares none).
	w := mustParse(t, wf(task("a", nil, `q: "${{ inputs.anything }}"`)))
	in, err := ResolveInputs(w, map[string]any{"anything": "x"})
	if err != nil || in["anything"] != "x" {
		t.Fatalf("ResolveInputs = %v, %v", in, err)
	}
}

func TestDiagnostics_Error(t *testing.T) {
	ds := Diagnostics{{File: "f", Line: 2, Col: 3, Field: "spec", Message: "m"}, {File: "f", Line: 1, Col: 1, Message: "n"}}
	if got := ds.Error(); got != "f:2:3: spec: m\nf:1:1: n" {
		t.Errorf("Error() = %q", got)
	}
	if ds.PolicyOnly() {
		t.Error("PolicyOnly true for non-policy diagnostics")
	}
}
