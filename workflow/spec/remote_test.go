package spec

import (
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestClosest(t *testing.T) {
	names := []string{"search", "get", "analyze", "echo", "temperature"}
	for _, c := range []struct{ in, want string }{
		{"gte", "get"},       // transposition: one step
		{"serach", "search"}, // transposition
		{"temprature", "temperature"},
		{"Search", "search"}, // case is not a difference
		{"weather", ""},      // nothing near
		{"search", ""},       // the name itself is no suggestion
		{"x", ""},
		{"gt", ""}, // too short to guess
		{"GET", "get"},
	} {
		if got := Closest(c.in, names); got != c.want {
			t.Errorf("Closest(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func steps(path string) []PathStep {
	segs, err := parsePath("x" + path)
	if err != nil {
		panic(err)
	}
	out := make([]PathStep, 0, len(segs)-1)
	for _, g := range segs[1:] {
		out = append(out, PathStep{Key: g.key, Index: g.index, IsIndex: g.isIdx})
	}
	return out
}

func TestOutputPathProblem(t *testing.T) {
	var schema map[string]any
	src := `{"type":"object","$defs":{"pt":{"type":"object","properties":{"x":{"type":"number"}},"additionalProperties":false}},
	  "properties":{
	    "temperature":{"type":"number"},
	    "points":{"type":"array","items":{"$ref":"#/$defs/pt"}},
	    "pair":{"type":"array","prefixItems":[{"type":"string"},{"type":"object","properties":{"k":{}}}],"items":false},
	    "free":{"type":"object"},
	    "tags":{"type":"object","additionalProperties":{"type":"array"}},
	    "either":{"anyOf":[{"type":"object","properties":{"a":{}}},{"type":"object","properties":{"b":{}}}]}
	  }}`
	if err := json.Unmarshal([]byte(src), &schema); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"", ""},
		{".temperature", ""},
		{".temprature", `output has no property "temprature" in the tool's outputSchema (declared: either, free, pair, points, tags, temperature); did you mean "temperature"?`},
		{".temperature.c", `output.temperature is of type number; it has no key "c"`},
		{".temperature[0]", `output.temperature is of type number; it cannot be indexed with [0]`},
		{".points[3].x", ""},
		{".points[3].y", `output.points[3] has no property "y" in the tool's outputSchema (declared: x)`},
		{".points.x", `output.points is of type array; it has no key "x"`},
		{".pair[1].k", ""},
		{".pair[2]", `output.pair has no item [2] (its items are limited)`},
		{".free.anything.deep", ""},
		{".tags.red[0]", ""},
		{".tags.red.x", `output.tags.red is of type array; it has no key "x"`},
		{".either.b", ""},
		{".either.c", `output.either has no property "c" in the tool's outputSchema (declared: a)`},
	} {
		if got := OutputPathProblem(schema, steps(c.path)); got != c.want {
			t.Errorf("output%s:\n got %q\nwant %q", c.path, got, c.want)
		}
	}
}

func TestOutputPathProblem_CyclicRefEnds(t *testing.T) {
	schema := map[string]any{"$ref": "#"}
	if got := OutputPathProblem(schema, steps(".a.b")); got != "" {
		t.Fatalf("got %q", got)
	}
}

func TestContentPathProblem(t *testing.T) {
	for _, c := range []struct{ path, want string }{
		{"", ""},
		{"[0].text", ""},
		{"[0].mimeType", ""},
		{".text", `the tool declares no outputSchema, so output is the result's content array; .text is not an index (use output[0].text for the first text block)`},
		{"[0][1]", `output[0] is a content block (an object); it cannot be indexed with [1]`},
		{"[0].txt", `output[0] is a content block, which has no key "txt" (keys: _meta, annotations, data, description, mimeType, name, resource, size, text, title, type, uri); did you mean "text"?`},
	} {
		if got := ContentPathProblem(steps(c.path)); got != c.want {
			t.Errorf("output%s:\n got %q\nwant %q", c.path, got, c.want)
		}
	}
}

const remoteWF = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: r}
spec:
  mcpServers: {s: {url: "https://example.com/mcp"}}
  actions: {a: {kind: mcp.call}}
  tasks:
    - id: one
      uses: action:a
      with:
        server: s
        tool: t
        arguments:
          lit: "$${{ not a template }}"
          tmpl: "id ${{ inputs.x }}"
          list: [1, "${{ inputs.y }}"]
          "a/b": {n: 2}
    - id: two
      uses: action:a
      with: {server: s, tool: t, arguments: {v: "${{ tasks.one.output.rows[0].name }}"}}
  outputs:
    o: "x=${{ tasks.two.output.v }}"
`

func TestStaticArgumentsAndFields(t *testing.T) {
	w, err := Parse("wf.yaml", []byte(remoteWF))
	if err != nil {
		t.Fatal(err)
	}
	args, templated := w.StaticArguments(0)
	want := map[string]any{"lit": "${{ not a template }}", "tmpl": "id ${{ inputs.x }}", "list": []any{1, "${{ inputs.y }}"}, "a/b": map[string]any{"n": 2}}
	if !reflect.DeepEqual(args, want) {
		t.Errorf("args = %#v", args)
	}
	if got := strings.Join(templated, " "); got != "/list/1 /tmpl" {
		t.Errorf("templated = %q", got)
	}
	for ptr, field := range map[string]string{
		"":        "spec.tasks[0].with.arguments",
		"/list/1": "spec.tasks[0].with.arguments.list[1]",
		"/a~1b/n": `spec.tasks[0].with.arguments["a/b"].n`,
	} {
		if got := w.ArgumentField(0, ptr); got != field {
			t.Errorf("ArgumentField(%q) = %q, want %q", ptr, got, field)
		}
	}
	var got []string
	for _, r := range w.OutputRefs() {
		var p []string
		for _, s := range r.Path {
			p = append(p, s.String())
		}
		got = append(got, fmtRef(r.Line, r.Col, r.Field, r.Task, strings.Join(p, "")))
	}
	wantRefs := []string{
		"20:50 spec.tasks[1].with.arguments.v one .rows[0].name",
		"22:11 spec.outputs.o two .v",
	}
	if strings.Join(got, "\n") != strings.Join(wantRefs, "\n") {
		t.Errorf("refs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantRefs, "\n"))
	}
}

func fmtRef(line, col int, field, task, path string) string {
	return strings.Join([]string{itoa(line) + ":" + itoa(col), field, task, path}, " ")
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestRenderArgumentsNamesPosition(t *testing.T) {
	w, err := Parse("wf.yaml", []byte(remoteWF))
	if err != nil {
		t.Fatal(err)
	}
	_, err = w.RenderArguments("two", Scope{Tasks: map[string]any{"one": map[string]any{"rows": []any{}}}})
	var te *TemplateError
	if !errors.As(err, &te) {
		t.Fatalf("err = %v, want a *TemplateError", err)
	}
	want := `wf.yaml:20:50: spec.tasks[1].with.arguments.v: template "${{ tasks.one.output.rows[0].name }}": tasks.one.output.rows has no index 0 (length 0)`
	if err.Error() != want {
		t.Fatalf("err:\n%s\nwant:\n%s", err, want)
	}
	_, err = w.RenderOutputs(Scope{Tasks: map[string]any{"two": map[string]any{}}})
	want = `wf.yaml:22:11: spec.outputs.o: template "${{ tasks.two.output.v }}": key "v" not found in tasks.two.output (keys: )`
	if err == nil || err.Error() != want {
		t.Fatalf("err:\n%v\nwant:\n%s", err, want)
	}
	// The same values render as Render does.
	v, err := w.RenderArguments("one", Scope{Inputs: map[string]any{"x": 7, "y": true}})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := Render(w.Spec.Tasks[0].With.Arguments, Scope{Inputs: map[string]any{"x": 7, "y": true}})
	if !reflect.DeepEqual(v, r) {
		t.Fatalf("RenderArguments = %#v, Render = %#v", v, r)
	}
}
