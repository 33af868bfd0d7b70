package spec

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// FuzzRender checks the template renderer on arbitrary text:
//
//   - it never panics, on text, on a value spliced in, or on a key;
//   - it never changes its input (Render returns a deep copy);
//   - escaping every "${{" as "$${{" gives back the text unchanged;
//   - a lone template takes the value it names, type and all, and one
//     inside text is replaced by the value's text;
//   - a key written ["key"] (strconv.Quote) names that key;
//   - templateRefs and Render agree on whether the text is well formed.
//
// Seeds: testdata/fuzz/FuzzRender. Run it long with
//
//	go test ./workflow/spec -run '^$' -fuzz '^FuzzRender$' -fuzztime 10m
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"", "plain", "${{ inputs.q }}", "a${{inputs.q}}b", "$${{ inputs.q }}", "$$${{", "${{", "}}",
		`${{ tasks.t.output.items[0]["odd key"] }}`, "${{ inputs.q[00] }}", "${{ inputs.q[-1] }}",
		`${{ inputs.q["\u00e9\x00"] }}`, "${{ tasks.t.outputx }}", "${{ inputs. q }}", "\xff${{ inputs.q }}\xfe",
	} {
		f.Add(s, "value")
	}
	f.Fuzz(func(t *testing.T, text, val string) {
		scope := Scope{
			Inputs: map[string]any{"q": val, "n": 1.5, "l": []any{val, nil}, "m": map[string]any{val: val}},
			Tasks:  map[string]any{"t": map[string]any{"items": []any{map[string]any{"odd key": val}}}},
		}
		in := map[string]any{"a": []any{text, val}, "b": text}
		inCopy := map[string]any{"a": []any{text, val}, "b": text}
		out, rerr := Render(in, scope)
		if !reflect.DeepEqual(in, inCopy) {
			t.Fatalf("Render changed its input: %#v", in)
		}
		_, terr := templateRefs(text)
		if rerr == nil && terr != nil {
			t.Fatalf("templateRefs(%q) = %v but Render succeeded", text, terr)
		}
		if rerr == nil {
			if m, ok := out.(map[string]any); !ok || len(m) != 2 {
				t.Fatalf("Render(map) = %#v", out)
			}
		}

		// Escaping every "${{" yields the text itself.
		esc := strings.ReplaceAll(text, "${{", "$${{")
		if got, err := Render(esc, scope); err != nil || got != text {
			t.Fatalf("Render(%q) = %#v, %v; want the text back %q", esc, got, err, text)
		}

		// A lone template keeps the value; inside text it is spliced.
		if got, err := Render("${{ inputs.q }}", scope); err != nil || got != val {
			t.Fatalf("lone template = %#v, %v; want %q", got, err, val)
		}
		lit := strings.ReplaceAll(text, "$", "") // text that holds no template
		if got, err := Render(lit+"${{ inputs.q }}"+lit, scope); err != nil || got != lit+val+lit {
			t.Fatalf("spliced = %#v, %v; want %q", got, err, lit+val+lit)
		}

		// ["key"] names the key, whatever its bytes, as long as the
		// quoted form neither closes the template nor the bracket.
		q := strconv.Quote(val)
		if !strings.Contains(q, "}}") && !strings.Contains(q, "]") {
			if got, err := Render("${{ inputs.m["+q+"] }}", scope); err != nil || got != val {
				t.Fatalf("inputs.m[%s] = %#v, %v; want %q", q, got, err, val)
			}
		}
	})
}
