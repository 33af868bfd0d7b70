package worker_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/worker"
)

// barrierTool is act whose first n executions each wait until all n are
// executing at once: the server itself observes n calls in flight
// together, or the test times out. Later executions pass straight on.
type barrierTool struct {
	mu       sync.Mutex
	n, in    int
	max      int
	released chan struct{}
}

func (b *barrierTool) def() mcptest.ToolDef {
	d := actTool()
	d.Handler = func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
		b.mu.Lock()
		b.in++
		b.max = max(b.max, b.in)
		if b.in == b.n {
			close(b.released)
		}
		b.mu.Unlock()
		select {
		case <-b.released:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		b.mu.Lock()
		b.in--
		b.mu.Unlock()
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	return d
}

// TestWorker_RunsQueuedRunsConcurrently: a Worker with Concurrency 4
// drains 12 queued runs; the server sees 4 calls in flight together (never
// more), every run succeeds with a verifying chain and run.started as its
// second event, and the appends of all runs went through the one
// group-commit writer (counted once each).
func TestWorker_RunsQueuedRunsConcurrently(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		const runs, conc = 12, 4
		bt := &barrierTool{n: conc, released: make(chan struct{})}
		srv := mcptest.Start(t, mcptest.Options{}, bt.def())
		db := b.Open(t, events.Options{})
		wf := mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`))
		submitter := &workflow.Runner{DB: db}
		ids := map[string]bool{}
		for range runs {
			id, err := submitter.Submit(context.Background(), wf, map[string]any{}, workflow.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			ids[id] = true
		}
		before := db.CommitStats()
		var started []string
		w := &worker.Worker{DB: db, Concurrency: conc, Drain: true, Name: "test-worker",
			NewRunner: func() *workflow.Runner { return &workflow.Runner{} },
			Started: func(id string, resumed bool) {
				if resumed {
					t.Errorf("run %s resumed, want started", id)
				}
				started = append(started, id)
			}}
		out, err := w.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if len(out) != runs || len(started) != runs {
			t.Fatalf("worker took %d runs (%d started), want %d", len(out), len(started), runs)
		}
		if bt.max != conc {
			t.Fatalf("the server saw at most %d calls at once, want %d", bt.max, conc)
		}
		for _, r := range out {
			if !ids[r.RunID] || r.State != workflow.StateSucceeded || r.Exit != 0 || r.Resumed {
				t.Errorf("run %+v", r)
			}
			evs, err := db.Events(context.Background(), r.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if err := events.Verify(evs); err != nil {
				t.Fatal(err)
			}
			var st vocab.RunStarted
			if evs[1].Type != vocab.TypeRunStarted || evs[1].Decode(&st) != nil || st.Worker != "test-worker" {
				t.Fatalf("run %s: second event %s %s", r.RunID, evs[1].Type, evs[1].Payload)
			}
		}
		after := db.CommitStats()
		if after.Commits-before.Commits > after.Appends-before.Appends {
			t.Fatalf("commit stats %+v -> %+v", before, after)
		}
		t.Logf("%d appends in %d commits", after.Appends-before.Appends, after.Commits-before.Commits)

		// A second claim of a run already started is refused and records nothing.
		for id := range ids {
			_, err := (&workflow.Runner{DB: db}).RunQueued(context.Background(), id, "late")
			if !errors.Is(err, workflow.ErrNotQueued) {
				t.Fatalf("RunQueued of a started run: %v, want ErrNotQueued", err)
			}
			break
		}
	})
}
