package spec

import (
	"fmt"
	"regexp"
	"strings"
)

// OutputPathProblem says why a task output described by schema (a tool's
// outputSchema, decoded JSON) cannot have path, or returns "" when it may.
// It follows properties, patternProperties, additionalProperties, items,
// prefixItems, local $ref and allOf/anyOf/oneOf (a path any branch allows
// is allowed). A key the schema does not declare is a problem when the
// schema lists its properties and says nothing of others: a misspelt field
// is what this is for. Where the schema says nothing, nothing is reported.
func OutputPathProblem(schema map[string]any, path []PathStep) string {
	var cur any = schema
	at := "output"
	for _, st := range path {
		next, problem := schemaStep(schema, cur, st, at, 0)
		if problem != "" || next == nil {
			return problem
		}
		cur, at = next, at+st.String()
	}
	return ""
}

// maxSchemaHops bounds $ref resolutions and combinator nesting per step, so
// a cyclic schema cannot loop.
const maxSchemaHops = 32

// schemaStep returns the schema of the value st leads to from a value
// described by s (nil: unknown, anything goes), or a problem.
func schemaStep(root map[string]any, s any, st PathStep, at string, hops int) (any, string) {
	if hops > maxSchemaHops {
		return nil, ""
	}
	m, ok := s.(map[string]any)
	if !ok {
		if b, isBool := s.(bool); isBool && !b {
			return nil, fmt.Sprintf("%s cannot exist (its schema is false)", at)
		}
		return nil, ""
	}
	if ref, ok := m["$ref"].(string); ok {
		target, found := resolveRef(root, ref)
		if !found {
			return nil, ""
		}
		return schemaStep(root, target, st, at, hops+1)
	}
	var branches []any
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		if bs, ok := m[k].([]any); ok {
			branches = append(branches, bs...)
		}
	}
	if len(branches) > 0 && !describesShape(m) {
		var first string
		for _, b := range branches {
			next, problem := schemaStep(root, b, st, at, hops+1)
			if problem == "" {
				return next, ""
			}
			if first == "" {
				first = problem
			}
		}
		return nil, first
	}
	types := schemaTypes(m)
	if st.IsIndex {
		if len(types) > 0 && !types["array"] {
			return nil, fmt.Sprintf("%s is %s; it cannot be indexed with %s", at, typeList(types), st)
		}
		if pre, ok := m["prefixItems"].([]any); ok && st.Index < len(pre) {
			return pre[st.Index], ""
		}
		switch items := m["items"].(type) {
		case []any: // draft-07 tuple form
			if st.Index < len(items) {
				return items[st.Index], ""
			}
			return m["additionalItems"], ""
		case bool:
			if !items {
				return nil, fmt.Sprintf("%s has no item %s (its items are limited)", at, st)
			}
		case map[string]any:
			return items, ""
		}
		return nil, ""
	}
	if len(types) > 0 && !types["object"] {
		return nil, fmt.Sprintf("%s is %s; it has no key %q", at, typeList(types), st.Key)
	}
	props, _ := m["properties"].(map[string]any)
	if p, ok := props[st.Key]; ok {
		return p, ""
	}
	if pp, ok := m["patternProperties"].(map[string]any); ok {
		for pat, sub := range pp {
			if re, err := regexp.Compile(pat); err == nil && re.MatchString(st.Key) {
				return sub, ""
			}
		}
	}
	switch ap := m["additionalProperties"].(type) {
	case map[string]any:
		return ap, ""
	case bool:
		if ap {
			return nil, ""
		}
	default:
		if props == nil {
			return nil, ""
		}
	}
	names := sortedNames(props)
	msg := fmt.Sprintf("%s has no property %q in the tool's outputSchema (declared: %s)", at, st.Key, strings.Join(names, ", "))
	if c := Closest(st.Key, names); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	return nil, msg
}

// describesShape reports whether m says something of its own about keys or
// items, beside any combinator (then m itself is walked).
func describesShape(m map[string]any) bool {
	for _, k := range []string{"properties", "items", "prefixItems", "additionalProperties", "patternProperties"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// resolveRef resolves a local reference ("#", "#/$defs/x") in root.
func resolveRef(root map[string]any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#") {
		return nil, false
	}
	var cur any = root
	for _, tok := range strings.Split(strings.TrimPrefix(ref[1:], "/"), "/") {
		if tok == "" {
			continue
		}
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func schemaTypes(m map[string]any) map[string]bool {
	out := map[string]bool{}
	switch t := m["type"].(type) {
	case string:
		out[t] = true
	case []any:
		for _, e := range t {
			if s, ok := e.(string); ok {
				out[s] = true
			}
		}
	}
	if out["integer"] {
		out["number"] = true
	}
	return out
}

func typeList(types map[string]bool) string {
	names := sortedNames(types)
	if len(names) == 1 {
		return "of type " + names[0]
	}
	return "of type " + strings.Join(names, " or ")
}

// contentKeys are the members of the content blocks of a tool result
// (text, image, audio, resource_link, embedded resource).
var contentKeys = []string{"_meta", "annotations", "data", "description", "mimeType", "name", "resource", "size", "text", "title", "type", "uri"}

// ContentPathProblem says why path cannot lead into the output of a tool
// without an outputSchema — the result's content array, whose blocks are
// objects such as {type: text, text: "..."} — or returns "" when it may.
func ContentPathProblem(path []PathStep) string {
	if len(path) == 0 {
		return ""
	}
	if !path[0].IsIndex {
		return fmt.Sprintf("the tool declares no outputSchema, so output is the result's content array; %s is not an index (use output[0].text for the first text block)", path[0])
	}
	if len(path) < 2 {
		return ""
	}
	at := "output" + path[0].String()
	if path[1].IsIndex {
		return fmt.Sprintf("%s is a content block (an object); it cannot be indexed with %s", at, path[1])
	}
	for _, k := range contentKeys {
		if k == path[1].Key {
			return ""
		}
	}
	msg := fmt.Sprintf("%s is a content block, which has no key %q (keys: %s)", at, path[1].Key, strings.Join(contentKeys, ", "))
	if c := Closest(path[1].Key, contentKeys); c != "" {
		msg += fmt.Sprintf("; did you mean %q?", c)
	}
	return msg
}
