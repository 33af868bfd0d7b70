package replay_test

// Copies of workflow's test helpers (the run loop's tests keep theirs):
// the replay tests record their sources with the same workflows and tools.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// openDB opens a fresh event log in a temporary directory.
func openDB(tb testing.TB) *events.DB {
	tb.Helper()
	return testkit.OpenDB(tb, "", events.Options{})
}

// oneCall is a workflow with one task calling tool on url.
func oneCall(url, tool, idem, args string) string {
	return testkit.Workflow{Name: "one-call", URL: url,
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: tool, Arguments: args}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.YAML()
}

func mustParse(tb testing.TB, src string) *spec.Workflow {
	tb.Helper()
	wf, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		tb.Fatalf("parse: %v", err)
	}
	return wf
}

// runMoves returns the call transitions runID's log records (moves on
// facts, or call.transition events), with From set.
func runMoves(tb testing.TB, db *events.DB, runID string) []vocab.CallTransition {
	tb.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		tb.Fatal(err)
	}
	ts, err := projector.Transitions(evs)
	if err != nil {
		tb.Fatal(err)
	}
	return ts
}

func describeRun(tb testing.TB, db *events.DB, runID string) []string {
	tb.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]string, len(evs))
	var d projector.Describer
	for i, e := range evs {
		out[i] = d.Describe(e)
	}
	return out
}

// actTool is the tool the redispatch tests call.
func actTool() mcptest.ToolDef {
	return mcptest.ToolDef{Name: "act",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"done":{"type":"boolean"}},"required":["done"]}`),
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
		}}
}

// runAct runs the one-task workflow against srv and returns the result.
func runAct(t *testing.T, db *events.DB, srv *mcptest.Server, idem string, observe func(events.Event)) *workflow.Result {
	t.Helper()
	wf := mustParse(t, oneCall(srv.URL, "act", idem, `{n: 1}`))
	res, err := (&workflow.Runner{DB: db, Observe: observe}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func exitCode(res *workflow.Result) int {
	var we *workflow.Error
	if errors.As(res.Err, &we) {
		return we.Code
	}
	return 0
}

// taskWorkflow is one task calling tool on url through an action of class
// idem; actionExtra adds keys to the action ("task: true").
func taskWorkflow(url, tool, idem, actionExtra string) string {
	if actionExtra != "" {
		actionExtra = ", " + actionExtra
	}
	return fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: task-call}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    act: {kind: mcp.call, idempotency: %s%s}
  tasks:
    - id: only
      uses: action:act
      with: {server: local, tool: %s, arguments: {topic: x}}
  outputs:
    result: ${{ tasks.only.output }}
`, url, idem, actionExtra, tool)
}

// researchTool is a task-required tool answering structured {n: 42}.
func researchTool(h mcptest.Handler) mcptest.ToolDef {
	if h == nil {
		h = func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: []map[string]any{{"type": "text", "text": "42"}}, StructuredContent: map[string]any{"n": 42}}, nil
		}
	}
	return mcptest.ToolDef{Name: "research", Execution: required, Handler: h,
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}
}

// runTask runs src with obs observing every committed event.
func runTask(t *testing.T, db *events.DB, src string, obs func(events.Event)) *workflow.Result {
	t.Helper()
	res, err := (&workflow.Runner{DB: db, Observe: obs}).Run(context.Background(), mustParse(t, src), nil, workflow.RunOptions{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// only returns the described events of the types given, in order.
func only(lines []string, prefixes ...string) []string {
	var out []string
	for _, l := range lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

var required = json.RawMessage(`{"taskSupport":"required"}`)

// progressTool sends n progress notifications, then answers "done".
func progressTool(name string, n int) mcptest.ToolDef {
	return mcptest.ToolDef{Name: name, Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		for i := 1; i <= n; i++ {
			if err := c.Progress(float64(i), float64(n), ""); err != nil {
				return nil, err
			}
		}
		return &mcptest.Result{Content: mcptest.Text("done")}, nil
	}}
}
