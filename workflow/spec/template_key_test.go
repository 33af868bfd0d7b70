package spec

import (
	"reflect"
	"strings"
	"testing"
)

// TestRender_QuotedKeys: a ["key"] segment ends at its closing quote, so a
// key may contain ], }}, [, quotes (escaped) and dots.
func TestRender_QuotedKeys(t *testing.T) {
	m := map[string]any{
		"a]b": 1, "a}}b": 2, "}}": 3, "]": 4, `say "hi"`: 5, "a.b": 6, "[x]": 7, `back\slash`: 8, "a]]b}}": 9,
		"nested": map[string]any{"x]": map[string]any{"y}}": "deep"}},
		"list]":  []any{"zero", "one"},
	}
	s := Scope{Inputs: map[string]any{"m": m}}
	tests := []struct {
		in   string
		want any
	}{
		{`${{ inputs.m["a]b"] }}`, 1},
		{`${{ inputs.m["a}}b"] }}`, 2},
		{`${{ inputs.m["}}"] }}`, 3},
		{`${{ inputs.m["]"] }}`, 4},
		{`${{ inputs.m["say \"hi\""] }}`, 5},
		{`${{ inputs.m["a.b"] }}`, 6},
		{`${{ inputs.m["[x]"] }}`, 7},
		{`${{ inputs.m["back\\slash"] }}`, 8},
		{`${{ inputs.m["a]]b}}"] }}`, 9},
		{`${{ inputs.m["nested"]["x]"]["y}}"] }}`, "deep"},
		{`${{ inputs.m.nested["x]"]["y}}"] }}`, "deep"},
		{`${{ inputs.m["list]"][1] }}`, "one"},
		{`${{inputs.m["a]b"]}}`, 1},
		// inside text, next to other templates
		{`v=${{ inputs.m["}}"] }}, w=${{ inputs.m["a]b"] }}!`, "v=3, w=1!"},
		{`${{ inputs.m["}}"] }}}}`, "3}}"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Render(tt.in, s)
			if err != nil {
				t.Fatalf("Render(%s): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("Render(%s) = %#v, want %#v", tt.in, got, tt.want)
			}
			refs, err := templateRefs(tt.in)
			if err != nil || len(refs) == 0 {
				t.Fatalf("templateRefs(%s) = %v, %v", tt.in, refs, err)
			}
		})
	}
}

// TestRender_QuotedKeyErrors: malformed quoted keys are errors that say why.
func TestRender_QuotedKeyErrors(t *testing.T) {
	s := Scope{Inputs: map[string]any{"m": map[string]any{"a": 1}}}
	tests := []struct{ in, want string }{
		{`${{ inputs.m["a }}`, "no closing quote"},
		{`${{ inputs.m["a"x] }}`, "is not followed by ]"},
		{`${{ inputs.m["a" }}`, "is not followed by ]"},
		{`${{ inputs.m["\q"] }}`, "bad quoted key"},
		{`${{ inputs.m["a]b"] `, "not closed with }}"},
		{`${{ inputs.m[a] }}`, "not a non-negative integer"},
		{`${{ inputs.m["missing]"] }}`, `"missing]"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := Render(tt.in, s)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Render(%s) error = %v, want it to contain %q", tt.in, err, tt.want)
			}
		})
	}
}

// TestSegmentString_RoundTrip: a key printed by segment.String parses back
// to the same key, whatever it contains.
func TestSegmentString_RoundTrip(t *testing.T) {
	for _, k := range []string{"a]b", "}}", `q"uote`, "x\ny", "a.b", "ünï", "]\"}}["} {
		expr := "inputs.m" + segment{key: k}.String()
		segs, err := parsePath(expr)
		if err != nil || len(segs) != 3 || segs[2].key != k {
			t.Fatalf("parsePath(%s) = %+v, %v; want key %q", expr, segs, err, k)
		}
	}
}
