package spec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func testScope() Scope {
	return Scope{
		Inputs: map[string]any{"query": "mcp", "n": 3, "flag": true, "tags": []any{"a", "b"}, "none": nil},
		Tasks: map[string]any{
			"find": map[string]any{
				"id":    "doc-1",
				"score": 0.5,
				"items": []any{map[string]any{"id": "x1"}, map[string]any{"id": "x2"}},
				"meta":  map[string]any{"odd key": "v", "n": json.Number("12")},
			},
			"raw": "plain text",
		},
	}
}

// TestRender_Typing: a lone template keeps the JSON type of its value; a
// template inside text is stringified (strings as is, others as compact JSON).
func TestRender_Typing(t *testing.T) {
	tests := []struct {
		in   any
		want any
	}{
		{"${{ inputs.query }}", "mcp"},
		{"${{ inputs.n }}", 3},
		{"${{inputs.n}}", 3},
		{"${{ inputs.flag }}", true},
		{"${{ inputs.tags }}", []any{"a", "b"}},
		{"${{ inputs.tags[1] }}", "b"},
		{"${{ inputs.none }}", nil},
		{"${{ tasks.find.output.score }}", 0.5},
		{"${{ tasks.find.output.items[1].id }}", "x2"},
		{`${{ tasks.find.output.meta["odd key"] }}`, "v"},
		{"${{ tasks.find.output.meta.n }}", json.Number("12")},
		{"${{ tasks.raw.output }}", "plain text"},
		{"${{ tasks.find.output.items[0] }}", map[string]any{"id": "x1"}},
		// inside text
		{"q=${{ inputs.query }}", "q=mcp"},
		{"n=${{ inputs.n }}!", "n=3!"},
		{"${{ inputs.flag }} ", "true "},
		{" ${{ inputs.query }}", " mcp"},
		{"${{ inputs.query }}${{ inputs.n }}", "mcp3"},
		{"tags=${{ inputs.tags }}", `tags=["a","b"]`},
		{"item=${{ tasks.find.output.items[0] }}", `item={"id":"x1"}`},
		{"none=${{ inputs.none }}", "none=null"},
		{"lit $${{ inputs.query }}", "lit ${{ inputs.query }}"},
		{"no templates", "no templates"},
		{"", ""},
		{"$ {{ not one }}", "$ {{ not one }}"},
		// deep
		{map[string]any{"a": []any{"${{ inputs.n }}", 1, nil}}, map[string]any{"a": []any{3, 1, nil}}},
		{42, 42},
		{nil, nil},
	}
	for _, tt := range tests {
		got, err := Render(tt.in, testScope())
		if err != nil {
			t.Errorf("Render(%#v): %v", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("Render(%#v) = %#v (%T), want %#v (%T)", tt.in, got, got, tt.want, tt.want)
		}
	}
}

func TestRender_Errors(t *testing.T) {
	tests := []struct {
		in   string
		want []string // substrings of the error
	}{
		{"${{ inputs.missing }}", []string{`"${{ inputs.missing }}"`, `input "missing" is not set`}},
		{"${{ tasks.fetch.output.x }}", []string{`task "fetch" has no output`}},
		{"${{ tasks.find.output.nope }}", []string{`key "nope" not found in tasks.find.output`}},
		{"${{ tasks.find.output.items[5].id }}", []string{"tasks.find.output.items has no index 5 (length 2)"}},
		{"${{ tasks.find.output.items.id }}", []string{"tasks.find.output.items is a list"}},
		{"${{ tasks.find.output.id.x }}", []string{"tasks.find.output.id is string; cannot take .x"}},
		{"${{ tasks.find.output.meta[0] }}", []string{"is an object; cannot index it with [0]"}},
		{"${{ inputs.none.x }}", []string{"inputs.none is null"}},
		{"x ${{ inputs.query", []string{"not closed"}},
		{"${{ }}", []string{"empty expression"}},
		{"${{ steps.a }}", []string{"unknown name steps"}},
		{"${{ tasks.find }}", []string{"want tasks.<id>.output"}},
		{"${{ inputs }}", []string{"want inputs.<name>"}},
		{"${{ inputs.a[-1] }}", []string{"not a non-negative integer"}},
		{"${{ inputs.a b }}", []string{"unexpected ' '"}},
		{"${{ inputs.a. }}", []string{"ends where a name was expected"}},
	}
	for _, tt := range tests {
		_, err := Render(tt.in, testScope())
		if err == nil {
			t.Errorf("Render(%q): no error", tt.in)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Render(%q) error %q does not contain %q", tt.in, err, w)
			}
		}
	}
}

func TestRender_DoesNotMutate(t *testing.T) {
	in := map[string]any{"a": "${{ inputs.query }}", "b": []any{"${{ inputs.n }}"}}
	if _, err := Render(in, testScope()); err != nil {
		t.Fatal(err)
	}
	if in["a"] != "${{ inputs.query }}" || in["b"].([]any)[0] != "${{ inputs.n }}" {
		t.Errorf("Render changed its input: %#v", in)
	}
}
