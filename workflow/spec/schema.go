package spec

import (
	"encoding/json"
	"sync"

	"github.com/invopop/jsonschema"
)

// SchemaID is the $id of the JSON Schema JSONSchema returns.
const SchemaID = "https://agentctl.dev/schemas/workflow/v1alpha1.json"

var schemaOnce = sync.OnceValue(func() []byte {
	r := &jsonschema.Reflector{
		RequiredFromJSONSchemaTags: true,
		ExpandedStruct:             true,
	}
	s := r.Reflect(&Workflow{})
	s.ID = SchemaID
	s.Title = "agentctl workflow (" + APIVersion + ")"
	s.Description = "A workflow file: remote MCP servers, mcp.call actions, tasks and outputs."
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		panic("workflow: marshal JSON Schema: " + err.Error()) // static types: cannot happen
	}
	return b
})

// JSONSchema returns the JSON Schema (draft 2020-12) of the workflow file
// format, generated from the spec types. Editors can use it for completion;
// Parse remains the authority (it also checks references between fields).
func JSONSchema() []byte {
	b := schemaOnce()
	return append([]byte(nil), b...)
}
