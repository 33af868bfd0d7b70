package transport

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// doublingSchema is issue 13's input schema: each $defs level references
// the next twice, so an unbounded validator evaluates 2^n subschemas.
func doublingSchema(n int) json.RawMessage {
	defs := map[string]any{}
	for i := range n {
		next := map[string]any{"$ref": fmt.Sprintf("#/$defs/a%d", i+1)}
		defs[fmt.Sprintf("a%d", i)] = map[string]any{"allOf": []any{next, next}}
	}
	defs[fmt.Sprintf("a%d", n)] = map[string]any{"type": "object"}
	b, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs, "allOf": []any{map[string]any{"$ref": "#/$defs/a0"}}})
	return b
}

// nestedOneOfSchema is issue 13's output schema: a oneOf of two array
// branches recursing into their items, 2^depth evaluations on nested arrays.
const nestedOneOfSchema = `{"$ref":"#/$defs/n","$defs":{"n":{"oneOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"array","items":{"$ref":"#/$defs/n"}}]}}}`

func nestedArrays(depth int) json.RawMessage {
	return json.RawMessage(strings.Repeat("[", depth) + strings.Repeat("]", depth))
}

func wantTooComplex(t *testing.T, err error, tool, bound string) {
	t.Helper()
	e := wantKind(t, err, KindSchemaTooComplex)
	if msg := e.Error(); !strings.Contains(msg, fmt.Sprintf("tool %q", tool)) || !strings.Contains(msg, bound) {
		t.Fatalf("error %q does not name tool %q and the bound %q", msg, tool, bound)
	}
	if e.Sent || e.MayHaveExecuted() {
		t.Fatalf("schema_too_complex must be definitive and sent nothing: %+v", e)
	}
}

// TestSchemaBudget_AllOfDoubling: N=20 took 4 s and N=30 never ended; both
// are now refused at once as schema_too_complex, naming the tool and the
// bound. N=10 (1,024 evaluations) is ordinary and validates.
func TestSchemaBudget_AllOfDoubling(t *testing.T) {
	for _, n := range []int{20, 30, 60} {
		tool := Tool{Name: fmt.Sprintf("doubling%d", n), InputSchema: doublingSchema(n)}
		wantTooComplex(t, ValidateArguments(tool, json.RawMessage(`{}`)), tool.Name, fmt.Sprint(MaxValidationSteps))
	}
	if err := ValidateArguments(Tool{Name: "doubling10", InputSchema: doublingSchema(10)}, json.RawMessage(`{}`)); err != nil {
		t.Fatalf("N=10: %v", err)
	}
}

// TestSchemaBudget_NestedOneOf: the output schema that grew to 24 GB RSS on
// 30 nested arrays is refused before validation; 8 levels (512
// evaluations) validate as before (oneOf with two equal branches fails).
func TestSchemaBudget_NestedOneOf(t *testing.T) {
	tool := Tool{Name: "tree", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(nestedOneOfSchema)}
	wantTooComplex(t, ValidateOutput(tool, nestedArrays(30)), "tree", fmt.Sprint(MaxValidationSteps))
	wantKind(t, ValidateOutput(tool, nestedArrays(8)), KindInvalidOutput)
}

// TestSchemaBudget_SchemaBounds: schema size, nesting depth and subschema
// count are bounded before and at compile time.
func TestSchemaBudget_SchemaBounds(t *testing.T) {
	big := `{"type":"object","description":"` + strings.Repeat("x", MaxSchemaBytes) + `"}`
	wantTooComplex(t, ValidateArguments(Tool{Name: "big", InputSchema: json.RawMessage(big)}, nil), "big", fmt.Sprint(MaxSchemaBytes))
	deep := strings.Repeat(`{"items":`, maxJSONDepth+1) + "{}" + strings.Repeat("}", maxJSONDepth+1)
	wantTooComplex(t, ValidateArguments(Tool{Name: "deep", InputSchema: json.RawMessage(deep)}, nil), "deep", fmt.Sprint(maxJSONDepth))
	props := map[string]any{}
	for i := range MaxSchemaNodes + 1 {
		props[fmt.Sprintf("p%d", i)] = map[string]any{}
	}
	many, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	wantTooComplex(t, ValidateArguments(Tool{Name: "many", InputSchema: many}, nil), "many", fmt.Sprint(MaxSchemaNodes))
}

// TestSchemaBudget_LargeOrdinaryInstance: a large value against a plain
// schema is linear work and stays within the budget.
func TestSchemaBudget_LargeOrdinaryInstance(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"]}}}}`)
	var rows []string
	for i := range 10000 {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"name":"r%d"}`, i, i))
	}
	doc := json.RawMessage(`{"rows":[` + strings.Join(rows, ",") + `]}`)
	if err := ValidateOutput(Tool{Name: "rows", OutputSchema: schema}, doc); err != nil {
		t.Fatal(err)
	}
}

// ordinarySchema is a typical tool schema: properties, enums, a $ref, an
// anyOf, nested objects and arrays.
const ordinarySchema = `{"type":"object","$defs":{"tag":{"type":"string","maxLength":32}},
"properties":{"query":{"type":"string","minLength":1},"limit":{"type":"integer","minimum":1,"maximum":100},
"mode":{"enum":["fast","exact","fuzzy"]},"tags":{"type":"array","items":{"$ref":"#/$defs/tag"}},
"filter":{"anyOf":[{"type":"null"},{"type":"object","properties":{"from":{"type":"string","format":"date"},"to":{"type":"string"}},"additionalProperties":false}]}},
"required":["query"],"additionalProperties":false}`

const ordinaryArgs = `{"query":"mcp transport","limit":20,"mode":"exact","tags":["a","b","c","d"],"filter":{"from":"2026-01-01","to":"2026-12-31"}}`

// BenchmarkValidateOrdinary measures ValidateArguments on an ordinary
// schema (compiled schema cached), the cost the budget pre-pass adds to.
func BenchmarkValidateOrdinary(b *testing.B) {
	tool := Tool{Name: "search", InputSchema: json.RawMessage(ordinarySchema)}
	args := json.RawMessage(ordinaryArgs)
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateArguments(tool, args); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidateRows measures ValidateOutput on a 1,000-row result.
func BenchmarkValidateRows(b *testing.B) {
	tool := Tool{Name: "rows", OutputSchema: json.RawMessage(`{"type":"object","properties":{"rows":{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"name":{"type":"string"}},"required":["id"]}}}}`)}
	var rows []string
	for i := range 1000 {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"name":"r%d"}`, i, i))
	}
	doc := json.RawMessage(`{"rows":[` + strings.Join(rows, ",") + `]}`)
	b.ReportAllocs()
	for b.Loop() {
		if err := ValidateOutput(tool, doc); err != nil {
			b.Fatal(err)
		}
	}
}
