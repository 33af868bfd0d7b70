package workflow_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// TestRun_FinishedTaskDurableWhileSiblingRuns: a task that succeeded
// while a sibling is still in flight (a slow call, a retry's wait, a long
// MCP task) and that no new task takes along has its outcome committed
// at once, not when the sibling ends: a crash in between must find the
// call finished, not in flight (an at_most_once call would end uncertain).
// The sibling's tool holds until the first task's task.finished is seen
// committed (or a failsafe bound passes, and the test fails).
func TestRun_FinishedTaskDurableWhileSiblingRuns(t *testing.T) {
	committed := make(chan struct{})
	var once sync.Once
	var held atomic.Bool
	hold := mcptest.ToolDef{Name: "slow", Handler: func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
		select {
		case <-committed:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(10 * time.Second): // a failsafe, not a synchronisation
			held.Store(true)
		}
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"ok": true}}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, flakyTool("fast", 0, false), hold)
	db := openDB(t)
	wf := mustParse(t, retryWorkflow(srv.URL, "at_most_once", "", 2, "fast", "slow"))
	observe := func(e events.Event) {
		if e.Type != vocab.TypeTaskFinished {
			return
		}
		var p vocab.TaskFinished
		if err := e.Decode(&p); err == nil && p.TaskID == "fast" {
			once.Do(func() { close(committed) })
		}
	}
	res, err := (&workflow.Runner{DB: db, Observe: observe}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != workflow.StateSucceeded {
		t.Fatalf("run %s (%v)", res.State, res.Err)
	}
	if held.Load() {
		t.Fatal("task fast's task.finished was not committed while task slow was in flight")
	}
	evs, err := db.Events(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Verify(evs); err != nil {
		t.Fatal(err)
	}
}
