package worker_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow/spec"
)

// actTool is a tool whose every call succeeds with {done: true}.
func actTool() mcptest.ToolDef {
	return mcptest.ToolDef{Name: "act",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"done":{"type":"boolean"}},"required":["done"]}`),
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
		}}
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

// describeRun is the run's log, one line an event (projector.Describer:
// a fact's move shows as from->to).
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
