package workflow

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/agentctl/agentctl/transport"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// contractSchemas compiles each distinct outputSchema once per run, keyed
// by the digest of its canonical JSON. It is safe for concurrent use (tasks
// may check their outputs at once); the zero value is ready.
type contractSchemas struct {
	mu       sync.Mutex
	byDigest map[string]*jsonschema.Schema
}

// compiled returns the compiled form of schema, compiling it on first use.
func (cs *contractSchemas) compiled(schema map[string]any) (*jsonschema.Schema, error) {
	b, err := canonjson.Marshal(schema)
	if err != nil {
		return nil, fmt.Errorf("outputSchema: %w", err)
	}
	key := canonjson.DigestBytes(b)
	cs.mu.Lock()
	s := cs.byDigest[key]
	cs.mu.Unlock()
	if s != nil {
		return s, nil
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("task-output.json", schema); err != nil {
		return nil, fmt.Errorf("outputSchema: %w", err)
	}
	if s, err = c.Compile("task-output.json"); err != nil {
		return nil, fmt.Errorf("outputSchema: %w", err)
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.byDigest == nil {
		cs.byDigest = map[string]*jsonschema.Schema{}
	}
	if prev := cs.byDigest[key]; prev != nil { // compiled meanwhile by another task
		return prev, nil
	}
	cs.byDigest[key] = s
	return s, nil
}

// validateContract checks a task output against the task's outputSchema.
func (cs *contractSchemas) validateContract(schema map[string]any, output any) error {
	s, err := cs.compiled(schema)
	if err != nil {
		return err
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
