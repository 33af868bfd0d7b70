package spec

import (
	"strings"
	"testing"
)

// TestCheck_ConcurrencyRetryTimeout: the keys of the task graph and of
// retries are checked with the file:line of the value at fault.
func TestCheck_ConcurrencyRetryTimeout(t *testing.T) {
	base := wf(task("a", nil, ""))
	tests := []struct {
		name, from, to, want string
	}{
		{"concurrency 0", "  policy:", "  concurrency: 0\n  policy:", "t.yaml:5:16: spec.concurrency: concurrency must be at least 1, got 0"},
		{"concurrency not a number", "  policy:", "  concurrency: many\n  policy:", "t.yaml:5:16: spec.concurrency: expected an integer"},
		{"retry without maxAttempts", "{ kind: mcp.call }", "{ kind: mcp.call, retry: { initialIntervalSeconds: 1 } }", "spec.actions.a.retry.maxAttempts: retry.maxAttempts is required"},
		{"retry maxAttempts 0", "{ kind: mcp.call }", "{ kind: mcp.call, retry: { maxAttempts: 0 } }", "spec.actions.a.retry.maxAttempts: retry.maxAttempts must be at least 1, got 0"},
		{"retry backoff below 1", "{ kind: mcp.call }", "{ kind: mcp.call, retry: { maxAttempts: 2, backoffFactor: 0.5 } }", "spec.actions.a.retry.backoffFactor: retry.backoffFactor must be at least 1, got 0.5"},
		{"taskTtlSeconds 0", "{ kind: mcp.call }", "{ kind: mcp.call, task: true, taskTtlSeconds: 0 }", "t.yaml:7:63: spec.actions.a.taskTtlSeconds: taskTtlSeconds must be at least 1, got 0"},
		{"task not a bool", "{ kind: mcp.call }", "{ kind: mcp.call, task: sometimes }", "t.yaml:7:41: spec.actions.a.task: expected true or false"},
		{"useTasks unknown", `url: "http://127.0.0.1:1/mcp"`, `url: "http://127.0.0.1:1/mcp", useTasks: sometimes`, "t.yaml:6:63: spec.mcpServers.s.useTasks: unknown useTasks \"sometimes\"; want one of optional, always, never"},
		{"timeoutSeconds 0", "      uses: action:a\n", "      uses: action:a\n      timeoutSeconds: 0\n", "spec.tasks[0].timeoutSeconds: timeoutSeconds must be at least 1, got 0"},
		{"continueOnError not a bool", "      uses: action:a\n", "      uses: action:a\n      continueOnError: yes please\n", "spec.tasks[0].continueOnError: expected true or false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.from, tc.to, 1)
			_, err := Parse("t.yaml", []byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want it to contain %q\n%s", err, tc.want, src)
			}
		})
	}
	w := mustParse(t, strings.Replace(base, "  policy:", "  concurrency: 2\n  policy:", 1))
	if w.TaskConcurrency() != 2 || mustParse(t, base).TaskConcurrency() != DefaultConcurrency {
		t.Fatalf("TaskConcurrency = %d / %d", w.TaskConcurrency(), mustParse(t, base).TaskConcurrency())
	}
	w = mustParse(t, strings.Replace(base, "{ kind: mcp.call }", "{ kind: mcp.call, retry: { maxAttempts: 3, initialIntervalSeconds: 0.5, backoffFactor: 1.5, maxIntervalSeconds: 10 } }", 1))
	if r := w.Spec.Actions["a"].Retry; r == nil || *r != (RetrySpec{MaxAttempts: 3, InitialIntervalSeconds: 0.5, BackoffFactor: 1.5, MaxIntervalSeconds: 10}) {
		t.Fatalf("retry = %+v", r)
	}
}

// TestJSONSchema_TaskKeys: the JSON Schema knows the MCP task keys.
func TestJSONSchema_TaskKeys(t *testing.T) {
	s := string(JSONSchema())
	for _, k := range []string{`"task"`, `"taskTtlSeconds"`, `"useTasks"`} {
		if !strings.Contains(s, k) {
			t.Errorf("JSON Schema lacks %s", k)
		}
	}
	w := mustParse(t, strings.Replace(wf(task("a", nil, "")), "{ kind: mcp.call }", "{ kind: mcp.call, task: true }", 1))
	if a := w.Spec.Actions["a"]; !a.Task || a.TaskTTL() != DefaultTaskTTLSeconds || w.Spec.MCPServers["s"].TasksPolicy() != UseTasksOptional {
		t.Fatalf("action %+v, policy %q", a, w.Spec.MCPServers["s"].TasksPolicy())
	}
}

// TestCheck_RetryWarnings: retry on an at_most_once or unknown (default)
// action draws a warning at its retry key naming what it still covers;
// the classes whose retry may follow a tool that ran draw none, and a
// warning does not make the file invalid.
func TestCheck_RetryWarnings(t *testing.T) {
	const base = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: w}
spec:
  mcpServers:
    s: {url: "https://mcp.example.com/mcp"}
  actions:
    amo: {kind: mcp.call, idempotency: at_most_once, retry: {maxAttempts: 3}}
    dflt: {kind: mcp.call, retry: {maxAttempts: 2}}
    safe: {kind: mcp.call, idempotency: idempotent, retry: {maxAttempts: 3}}
    none: {kind: mcp.call, idempotency: at_most_once}
  tasks:
    - {id: a, uses: action:amo, with: {server: s, tool: t}}
    - {id: b, uses: action:dflt, with: {server: s, tool: t}}
    - {id: c, uses: action:safe, with: {server: s, tool: t}}
    - {id: d, uses: action:none, with: {server: s, tool: t}}
`
	w := mustParse(t, base)
	ws := w.Warnings()
	if len(ws) != 2 {
		t.Fatalf("warnings = %v, want 2", ws)
	}
	for i, want := range []struct {
		field, class string
		line         int
	}{{"spec.actions.amo.retry", "at_most_once", 8}, {"spec.actions.dflt.retry", "unknown (the default)", 9}} {
		d := ws[i]
		if d.Field != want.field || d.Line != want.line || !strings.Contains(d.Message, "idempotency is "+want.class) ||
			!strings.Contains(d.Message, "connection refused") || !strings.Contains(d.Message, "isError") {
			t.Fatalf("warning %d = %s, want at %s (line %d) naming %s and what it covers", i, d, want.field, want.line, want.class)
		}
	}
}
