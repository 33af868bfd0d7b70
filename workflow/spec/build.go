package spec

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Build checks a workflow made in code (the ad hoc commands build one from
// flags) exactly as Parse checks a file, and gives it a Source: the value's
// JSON encoding, which resume and replay parse back to the same workflow
// (JSON is YAML). Values are encoded, never spliced into text, so a flag
// cannot add keys or templates; strings that must stay literal go through
// Literal first. file names the workflow in diagnostics.
func Build(file string, w Workflow) (*Workflow, error) {
	src, err := json.MarshalIndent(w, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("build workflow %s: %w", file, err)
	}
	return Parse(file, src)
}

// Literal returns v (decoded JSON: maps, slices, strings, numbers) with
// every "${{" in its strings escaped as "$${{", so that Render gives v back
// unchanged: data, not template source.
func Literal(v any) any {
	switch x := v.(type) {
	case string:
		return strings.ReplaceAll(x, "${{", "$${{")
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = Literal(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = Literal(e)
		}
		return out
	}
	return v
}
