package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/agentctl/agentctl/transport"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validateContract checks a task output against the task's outputSchema.
func validateContract(schema map[string]any, output any) error {
	c := jsonschema.NewCompiler()
	if err := c.AddResource("task-output.json", schema); err != nil {
		return fmt.Errorf("outputSchema: %w", err)
	}
	s, err := c.Compile("task-output.json")
	if err != nil {
		return fmt.Errorf("outputSchema: %w", err)
	}
	// Validate the JSON form of the output (numbers as json.Number-free values).
	raw, err := json.Marshal(output)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return err
	}
	if sb, err := json.Marshal(schema); err == nil { // remote output, unbounded validator: bound its work first
		if err := transport.CheckSchemaBudget("task outputSchema", sb, raw); err != nil {
			return err
		}
	}
	if err := s.Validate(v); err != nil {
		return fmt.Errorf("%s", strings.TrimSpace(err.Error()))
	}
	return nil
}

// decodeJSON decodes with numbers kept as sent.
func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("decode output: %w", err)
	}
	return nil
}

// sanitize neutralises control characters and terminal escapes in remote
// text before it reaches a human.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if unicode.IsControl(r) || r == 0x1b {
			return '�'
		}
		return r
	}, s)
}
