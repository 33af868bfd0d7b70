package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidateArguments checks args against t's inputSchema. A violation is an
// *Error of KindInvalidArguments naming the schema path and the instance
// location; nothing is sent. A null argument for a property the schema
// declares and does not require counts as not provided (MCP's header rule
// says the same, "null or not provided"; callers often write an absent
// optional value as null): it is checked as absent and sent as given.
func ValidateArguments(t Tool, args json.RawMessage) error {
	if !present(args) {
		args = []byte("{}")
	}
	schema := t.inputSchema()
	return t.scrub(validate(t, schema, withoutOptionalNulls(schema, args), "input", KindInvalidArguments))
}

// withoutOptionalNulls returns args without its null members that schema
// declares in properties and does not list in required; args as given when
// there is none, or when either is not a strictly read JSON object (the
// check then reports what it finds).
func withoutOptionalNulls(schema, args []byte) []byte {
	if !bytes.Contains(args, []byte("null")) || strictValid(args) != nil {
		return args
	}
	var obj map[string]json.RawMessage
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(args, &obj) != nil || json.Unmarshal(schema, &s) != nil {
		return args
	}
	changed := false
	for k, v := range obj {
		if _, declared := s.Properties[k]; declared && string(bytes.TrimSpace(v)) == "null" && !slices.Contains(s.Required, k) {
			delete(obj, k)
			changed = true
		}
	}
	if !changed {
		return args
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return args
	}
	return b
}

// ValidateOutput checks structured (structuredContent) against t's
// outputSchema (JSON Schema 2020-12 by default, draft-07 when "$schema" says
// so). A tool without an outputSchema accepts anything. A tool with one
// requires structured content. Violations are KindInvalidOutput.
func ValidateOutput(t Tool, structured json.RawMessage) error {
	if !present(t.outputSchema()) {
		return nil
	}
	if !present(structured) {
		return &Error{Op: "validate output", Kind: KindInvalidOutput,
			Message: fmt.Sprintf("tool %q declares an outputSchema but the result has no structuredContent", t.Name)}
	}
	return t.scrub(validate(t, t.outputSchema(), structured, "output", KindInvalidOutput))
}

// noLoader refuses every external $ref: remote schemas are data, and a
// schema must never make us read a file or the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema reference %q not allowed", url)
}

func validate(t Tool, schema, doc []byte, which string, kind Kind) error {
	op := "validate " + which
	fail := func(format string, args ...any) error {
		return &Error{Op: op, Kind: kind, Message: fmt.Sprintf("tool %q: ", t.Name) + fmt.Sprintf(format, args...)}
	}
	if !present(schema) {
		return fail("no %sSchema", which)
	}
	cs, inst, err := prepare(t.Name, which, op, kind, schema, doc)
	if err != nil {
		return err
	}
	err = cs.sch.Validate(inst)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fail("%v", err)
	}
	out := ve.BasicOutput()
	var parts []string
	for _, u := range out.Errors {
		if u.Error == nil || len(u.Errors) > 0 {
			continue
		}
		parts = append(parts, fmt.Sprintf("at %q (schema %s): %s", "/"+strings.TrimPrefix(u.InstanceLocation, "/"), "#"+u.KeywordLocation, u.Error.String()))
		if len(parts) == 5 {
			break
		}
	}
	if len(parts) == 0 {
		parts = append(parts, strings.ReplaceAll(ve.Error(), schemaLoc, ""))
	}
	return fail("%s", strings.Join(parts, "; "))
}

// prepare checks schema and doc against the bounds, compiles the schema
// and decodes the instance. Over a bound is KindSchemaTooComplex; anything
// else wrong is kind.
func prepare(tool, which, op string, kind Kind, schema, doc []byte) (*compiledSchema, any, error) {
	fail := func(format string, args ...any) error {
		return &Error{Op: op, Kind: kind, Message: fmt.Sprintf("tool %q: ", tool) + fmt.Sprintf(format, args...)}
	}
	tooComplex := func(err error) error {
		return &Error{Op: op, Kind: KindSchemaTooComplex, Message: fmt.Sprintf("tool %q: %sSchema is too complex: %v", tool, which, err)}
	}
	if len(schema) > MaxSchemaBytes {
		return nil, nil, tooComplex(fmt.Errorf("schema is %d bytes, more than %d", len(schema), MaxSchemaBytes))
	}
	if err := checkDepth(schema); err != nil {
		return nil, nil, tooComplex(fmt.Errorf("schema: %w", err))
	}
	if n := countObjects(schema); n > MaxSchemaNodes {
		return nil, nil, tooComplex(fmt.Errorf("schema has %d objects, more than %d subschemas", n, MaxSchemaNodes))
	}
	if err := checkDepth(doc); err != nil {
		return nil, nil, fail("%v", err)
	}
	cs, err := schemas.compile(schema)
	if err != nil {
		var tc *schemaTooComplex
		if errors.As(err, &tc) {
			return nil, nil, tooComplex(err)
		}
		return nil, nil, fail("%v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, nil, fail("%s is not JSON: %v", which, err)
	}
	if err := checkBudget(cs.sch, cs.graph, doc, inst); err != nil {
		return nil, nil, tooComplex(err)
	}
	return cs, inst, nil
}

// CheckSchemaBudget returns a KindSchemaTooComplex error when validating
// doc against schema (JSON Schema 2020-12 by default) may exceed the
// bounds (MaxSchemaBytes, MaxSchemaNodes, nesting depth,
// MaxValidationSteps), naming name; otherwise nil, whatever else is wrong
// with either. It guards validators other than ValidateArguments and
// ValidateOutput (e.g. a workflow task's outputSchema) before they run.
func CheckSchemaBudget(name string, schema, doc []byte) error {
	_, _, err := prepare(name, "output", "validate output", KindInvalidOutput, schema, doc)
	if KindOf(err) == KindSchemaTooComplex {
		return err
	}
	return nil
}

// schemaLoc is the location every tool schema is compiled under.
const schemaLoc = "agentctl:///tool/schema.json"

// maxCachedSchemaBytes bounds the compiled-schema cache by the size of the
// schemas' source: a server may list 10,000 tools or a 1 MB schema, and a
// compiled schema holds its parsed source. A schema larger than a quarter
// of the bound is compiled every time.
const maxCachedSchemaBytes = 1 << 20

// schemas caches compiled schemas by their exact bytes: compiling costs
// more than the call it validates, and a run calls the same tools again
// and again. Compilation depends on nothing but the bytes (no loader, a
// fixed draft), so equal bytes give an equal schema. A compiled schema is
// immutable and safe for concurrent Validate calls.
var schemas = &schemaCache{m: map[string]*compiledSchema{}}

type schemaCache struct {
	mu    sync.Mutex
	m     map[string]*compiledSchema
	bytes int
}

// compiledSchema is a compiled schema and what the budget pre-pass needs of its graph.
type compiledSchema struct {
	sch   *jsonschema.Schema
	graph *schemaGraph
}

// cached returns the compiled schema for raw when the cache holds it, else
// nil; it never compiles.
func (c *schemaCache) cached(raw []byte) *compiledSchema {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[string(raw)]
}

// compile returns the compiled schema for raw, compiling it on a miss; a
// schema that fails to compile is not cached.
func (c *schemaCache) compile(raw []byte) (*compiledSchema, error) {
	c.mu.Lock()
	cs, ok := c.m[string(raw)]
	c.mu.Unlock()
	if ok {
		return cs, nil
	}
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("schema is not JSON: %v", err)
	}
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.UseLoader(noLoader{})
	if err := comp.AddResource(schemaLoc, sdoc); err != nil {
		return nil, fmt.Errorf("schema: %v", err)
	}
	sch, err := comp.Compile(schemaLoc)
	if err != nil {
		return nil, fmt.Errorf("schema does not compile: %s", strings.ReplaceAll(err.Error(), schemaLoc, ""))
	}
	g, err := walkSchema(sch)
	if err != nil {
		return nil, err
	}
	cs = &compiledSchema{sch: sch, graph: g}
	if len(raw) > maxCachedSchemaBytes/4 {
		return cs, nil
	}
	c.mu.Lock()
	if c.bytes+len(raw) > maxCachedSchemaBytes {
		clear(c.m) // crude but bounded; a run reuses a handful of schemas
		c.bytes = 0
	}
	if _, ok := c.m[string(raw)]; !ok {
		c.m[string(raw)] = cs
		c.bytes += len(raw)
	}
	c.mu.Unlock()
	return cs, nil
}
