package workflow_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// TestRun_ConcurrencyOneIsFileOrder: with concurrency 1 the server sees the
// tasks' calls one at a time in TasksInOrder's order (a task that needs a
// later one runs after it), and a file without needs runs one task after
// the other whatever spec.concurrency says, as before concurrency existed.
func TestRun_ConcurrencyOneIsFileOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	rec := func(name string) mcptest.ToolDef {
		return mcptest.ToolDef{Name: name, Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			mu.Lock()
			seen = append(seen, name)
			mu.Unlock()
			return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"ok": true}}, nil
		}}
	}
	srv := mcptest.Start(t, mcptest.Options{}, rec("a"), rec("b"), rec("c"), rec("d"))
	for _, tc := range []struct {
		name, edit string
		conc       int
		want       []string
	}{
		// a needs c (a later task); b and c need nothing: b, c, then a, then d (no needs: after a).
		{"needs a later task, concurrency 1", "a:[c] b:[] c:[]", 1, []string{"b", "c", "a", "d"}},
		// No needs anywhere: each task waits for the one before it.
		{"no needs, concurrency 8", "", 8, []string{"a", "b", "c", "d"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			src := retryWorkflow(srv.URL, "idempotent", "", tc.conc, "a", "b", "c", "d")
			// retryWorkflow gives every task needs: []; put back the ones asked for.
			src = strings.ReplaceAll(src, "      needs: []\n", "")
			for _, kv := range strings.Fields(tc.edit) {
				id, needs, _ := strings.Cut(kv, ":")
				line := "    - id: " + id + "\n"
				src = strings.Replace(src, line, line+"      needs: "+needs+"\n", 1)
			}
			res, err := (&workflow.Runner{DB: openDB(t)}).Run(context.Background(), mustParse(t, src), nil, workflow.RunOptions{})
			if err != nil || res.State != workflow.StateSucceeded {
				t.Fatalf("run %v %+v", err, res)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, tc.want) {
				t.Fatalf("server saw %v, want %v", seen, tc.want)
			}
		})
	}
}
