package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// ValidateArguments checks args against t's inputSchema. A violation is an
// *Error of KindInvalidArguments naming the schema path and the instance
// location; nothing is sent.
func ValidateArguments(t Tool, args json.RawMessage) error {
	if !present(args) {
		args = []byte("{}")
	}
	return validate(t, t.InputSchema, args, "input", KindInvalidArguments)
}

// ValidateOutput checks structured (structuredContent) against t's
// outputSchema (JSON Schema 2020-12 by default, draft-07 when "$schema" says
// so). A tool without an outputSchema accepts anything. A tool with one
// requires structured content. Violations are KindInvalidOutput.
func ValidateOutput(t Tool, structured json.RawMessage) error {
	if !present(t.OutputSchema) {
		return nil
	}
	if !present(structured) {
		return &Error{Op: "validate output", Kind: KindInvalidOutput,
			Message: fmt.Sprintf("tool %q declares an outputSchema but the result has no structuredContent", t.Name)}
	}
	return validate(t, t.OutputSchema, structured, "output", KindInvalidOutput)
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
	if err := checkDepth(schema); err != nil {
		return fail("schema: %v", err)
	}
	if err := checkDepth(doc); err != nil {
		return fail("%v", err)
	}
	sdoc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return fail("schema is not JSON: %v", err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fail("%s is not JSON: %v", which, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "agentctl:///tool/schema.json"
	if err := c.AddResource(loc, sdoc); err != nil {
		return fail("schema: %v", err)
	}
	sch, err := c.Compile(loc)
	if err != nil {
		return fail("schema does not compile: %s", strings.ReplaceAll(err.Error(), loc, ""))
	}
	err = sch.Validate(inst)
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
		parts = append(parts, strings.ReplaceAll(ve.Error(), loc, ""))
	}
	return fail("%s", strings.Join(parts, "; "))
}
