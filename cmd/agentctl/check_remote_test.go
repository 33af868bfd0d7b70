package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// checkHeader is the start of every workflow of these tests: line 1 to 9,
// so that the tasks start on line 10 and the expected positions are stable.
const checkHeader = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: check-demo}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [AGENTCTL_CHECK_TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
`

// writeCheckWorkflow writes checkHeader, the remote "local" at url with
// more keys, and body (actions, tasks, outputs) to wf.yaml in a new directory.
func writeCheckWorkflow(t *testing.T, url, serverKeys, body string) string {
	t.Helper()
	src := checkHeader + "    local: {url: \"" + url + "\"" + serverKeys + "}\n" + body
	p := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const lookupBody = `  actions:
    lookup: {kind: mcp.call, idempotency: idempotent}
  tasks:
    - id: find
      uses: action:lookup
      with: {server: local, tool: search, arguments: {q: "${{ inputs.q }}"}}
    - id: fetch
      uses: action:lookup
      with: {server: local, tool: get, arguments: {id: "${{ tasks.find.output.id }}"}}
  outputs:
    title: "${{ tasks.fetch.output.title }}"
`

// TestCLI_CheckRemote_Findings: each kind of finding, one workflow each,
// against the go-sdk demo server (or the mcptest server where the demo
// server has no such tool): the exact line, exit 2.
func TestCLI_CheckRemote_Findings(t *testing.T) {
	_, demo := demotest.StartTest(t, demoserver.Options{})
	texty := mcptest.Start(t, mcptest.Options{},
		mcptest.ToolDef{Name: "say"},
		mcptest.ToolDef{Name: "long", Execution: json.RawMessage(`{"taskSupport":"required"}`)},
		mcptest.ToolDef{Name: "quick", Execution: json.RawMessage(`{"taskSupport":"forbidden"}`)})
	cases := []struct {
		name, url, serverKeys, body string
		want                        string // the finding's line after "FILE:"
	}{
		{"unknown_tool", demo, "", strings.Replace(lookupBody, "tool: get", "tool: gte", 1),
			`19:35: unknown_tool: tool "gte" is not on server local; did you mean "get"?`},
		{"invalid_arguments", demo, "", `  actions:
    a: {kind: mcp.call, idempotency: pure}
  tasks:
    - id: count
      uses: action:a
      with: {server: local, tool: analyze, arguments: {text: "${{ inputs.text }}", steps: 50}}
`, `16:91: invalid_arguments: tool "analyze", argument /steps: maximum: got 50, want 20`},
		{"output_path", demo, "", strings.Replace(lookupBody, "output.title", "output.titel", 1),
			`21:13: output_path: template ${{ tasks.fetch.output.titel }}: tool "get" of task fetch: output has no property "titel" in the tool's outputSchema (declared: body, id, title); did you mean "title"?`},
		{"output_path_text_only", texty.URL, "", `  actions:
    a: {kind: mcp.call, idempotency: pure}
  tasks:
    - id: greet
      uses: action:a
      with: {server: local, tool: say}
  outputs:
    said: "${{ tasks.greet.output.text }}"
`, `18:12: output_path: template ${{ tasks.greet.output.text }}: tool "say" of task greet: the tool declares no outputSchema, so output is the result's content array; .text is not an index (use output[0].text for the first text block)`},
		{"task_support_required", texty.URL, "", `  actions:
    a: {kind: mcp.call, idempotency: at_most_once}
  tasks:
    - id: slow
      uses: action:a
      with: {server: local, tool: long}
`, `16:35: task_support: tool "long" requires a task (execution.taskSupport = required) but server local does not advertise tasks for tools/call; the call would fail before sending`},
		{"task_support_forbidden", texty.URL, "", `  actions:
    a: {kind: mcp.call, idempotency: at_most_once, task: true}
  tasks:
    - id: fast
      uses: action:a
      with: {server: local, tool: quick}
`, `16:35: task_support: action "a" asks for a task (task: true) but tool "quick" does not support tasks (execution.taskSupport absent or forbidden); it would be called directly, without a task`},
		{"unset_secret", demo, ", headers: {authorization: {env: AGENTCTL_CHECK_TOKEN}}", lookupBody,
			`10:79: unset_secret: secret env:AGENTCTL_CHECK_TOKEN (header authorization of remote local) is empty or unset in this environment; set it and run again`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AGENTCTL_CHECK_TOKEN", "")
			wf := writeCheckWorkflow(t, c.url, c.serverKeys, c.body)
			db := filepath.Join(t.TempDir(), "a.db")
			if _, stderr, code := cli(t, "check", wf); code != 0 {
				t.Fatalf("offline check: exit %d: %s", code, stderr)
			}
			out, stderr, code := cli(t, "check", "--remote", wf, "--db", db)
			if code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, out, stderr)
			}
			if got, want := out, wf+":"+c.want+"\n"; got != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}
