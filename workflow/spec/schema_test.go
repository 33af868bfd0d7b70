package spec

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(JSONSchema()))
	if err != nil {
		t.Fatalf("JSONSchema is not JSON: %v", err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("JSONSchema does not compile: %v", err)
	}
	return s
}

// yamlToJSONValue decodes YAML into the values the validator expects.
func yamlToJSONValue(t *testing.T, src []byte) any {
	t.Helper()
	var n yaml.Node
	if err := yaml.Unmarshal(src, &n); err != nil {
		t.Fatal(err)
	}
	d := newDecoder("x")
	v := d.toAny(n.Content[0], "")
	if len(d.diags) > 0 {
		t.Fatal(d.diags)
	}
	return v
}

// TestJSONSchema_Examples validates every examples/*.yaml against JSONSchema().
func TestJSONSchema_Examples(t *testing.T) {
	s := compileSchema(t)
	files, _ := filepath.Glob("../../examples/*.yaml")
	good, _ := filepath.Glob("testdata/lang/good/*.yaml")
	files = append(files, good...)
	if len(files) == 0 {
		t.Fatal("no examples")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(yamlToJSONValue(t, src)); err != nil {
			t.Errorf("%s does not validate against JSONSchema():\n%v", f, err)
		}
	}
}

// TestJSONSchema_Rejects: the schema is closed like the parser (unknown
// keys) and refuses what the parser refuses (kind, literal header values,
// idempotency classes).
func TestJSONSchema_Rejects(t *testing.T) {
	s := compileSchema(t)
	for name, src := range map[string]string{
		"unknown key":    "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: x}\nspec: {tasks: [{id: a, uses: 'action:a', with: {server: s, tool: t}}]}\nextra: 1\n",
		"bad kind":       "apiVersion: agentctl.dev/v1alpha1\nkind: Flow\nmetadata: {name: x}\nspec: {tasks: [{id: a, uses: 'action:a', with: {server: s, tool: t}}]}\n",
		"literal header": "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: x}\nspec: {mcpServers: {s: {url: 'https://x', headers: {a: literal}}}, tasks: [{id: a, uses: 'action:a', with: {server: s, tool: t}}]}\n",
		"idempotency":    "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: x}\nspec: {actions: {a: {kind: mcp.call, idempotency: sometimes}}, tasks: [{id: a, uses: 'action:a', with: {server: s, tool: t}}]}\n",
	} {
		if err := s.Validate(yamlToJSONValue(t, []byte(src))); err == nil {
			t.Errorf("%s: schema accepted it", name)
		}
	}
}

func TestJSONSchema_Keys(t *testing.T) {
	var m map[string]any
	if err := json.Unmarshal(JSONSchema(), &m); err != nil {
		t.Fatal(err)
	}
	if m["$schema"] != "https://json-schema.org/draft/2020-12/schema" || m["additionalProperties"] != false {
		t.Errorf("$schema = %v, additionalProperties = %v", m["$schema"], m["additionalProperties"])
	}
	props := m["properties"].(map[string]any)
	for _, k := range []string{"apiVersion", "kind", "metadata", "spec"} {
		if _, ok := props[k]; !ok {
			t.Errorf("schema lacks property %s", k)
		}
	}
}
