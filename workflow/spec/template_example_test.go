package spec_test

import (
	"fmt"

	"github.com/agentctl/agentctl/workflow/spec"
)

func ExampleRender() {
	scope := spec.Scope{
		Inputs: map[string]any{"query": "mcp"},
		Tasks:  map[string]any{"find": map[string]any{"items": []any{map[string]any{"id": 7}}}},
	}
	args := map[string]any{
		"id":    "${{ tasks.find.output.items[0].id }}", // a lone template keeps its type
		"label": "id ${{ tasks.find.output.items[0].id }} for ${{ inputs.query }}",
	}
	out, err := spec.Render(args, scope)
	fmt.Printf("%#v %v\n", out.(map[string]any)["id"], err)
	fmt.Println(out.(map[string]any)["label"])
	_, err = spec.Render("${{ tasks.find.output.items[3] }}", scope)
	fmt.Println(err)
	// Output:
	// 7 <nil>
	// id 7 for mcp
	// template "${{ tasks.find.output.items[3] }}": tasks.find.output.items has no index 3 (length 1)
}

func ExampleParse() {
	src := `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: demo}
spec:
  mcpServers: {remote: {url: "https://mcp.example.com/mcp"}}
  actions: {lookup: {kind: mcp.call, idempotency: pure}}
  tasks:
    - id: find
      uses: action:lookup
      with: {server: remote, tool: search, retries: 3}
`
	_, err := spec.Parse("demo.yaml", []byte(src))
	fmt.Println(err)
	// Output:
	// demo.yaml:10:44: spec.tasks[0].with.retries: unknown key "retries" in spec.tasks[0].with; allowed: server, tool, arguments
}
