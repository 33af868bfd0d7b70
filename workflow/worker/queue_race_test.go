package worker_test

import (
	"context"
	"errors"
	"reflect"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// raceDialer starts the queued run as another worker would, while this
// one dials the remote (after it read the log, before its first commit).
type raceDialer struct {
	db    *events.DB
	runID string
}

func (d raceDialer) Dial(remote string, cfg transport.Config) (workflow.Conn, error) {
	rec := events.Record{Stream: "run", Type: vocab.TypeRunStarted, Payload: vocab.RunStarted{Worker: "other", Command: "worker"}}
	if _, err := d.db.AppendAfter(context.Background(), d.runID, 1, []events.Record{rec}, projector.Apply); err != nil {
		return nil, err
	}
	return workflow.NetworkDialer{}.Dial(remote, cfg)
}

// TestRunQueued_LostRaceSendsNothing: run.started rides the run's first
// commit (the call's intent), a compare-and-append after run.created. A
// worker that another started the run under, between its read of the log
// and that commit, gets ErrNotQueued; its intent is not recorded and the
// tool is never called; the log holds the other worker's run.started only.
func TestRunQueued_LostRaceSendsNothing(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		db := b.Open(t, events.Options{})
		var calls atomic.Int64
		tool := actTool()
		h := tool.Handler
		tool.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			calls.Add(1)
			return h(ctx, c)
		}
		srv := mcptest.Start(t, mcptest.Options{}, tool)
		wf := mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`))
		ctx := context.Background()
		id, err := (&workflow.Runner{DB: db}).Submit(ctx, wf, map[string]any{}, workflow.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = (&workflow.Runner{DB: db, Dialer: raceDialer{db: db, runID: id}}).RunQueued(ctx, id, "this")
		if !errors.Is(err, workflow.ErrNotQueued) || !errors.Is(err, events.ErrConflict) {
			t.Fatalf("RunQueued that lost the race: %v, want ErrNotQueued (a conflict)", err)
		}
		if n := calls.Load(); n != 0 {
			t.Fatalf("the tool was called %d times, want 0", n)
		}
		evs, err := db.Events(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, e := range evs {
			types = append(types, e.Type)
		}
		if want := []string{vocab.TypeRunCreated, vocab.TypeRunStarted}; !reflect.DeepEqual(types, want) {
			t.Fatalf("log %v, want %v", types, want)
		}
		var st vocab.RunStarted
		if err := evs[1].Decode(&st); err != nil || st.Worker != "other" {
			t.Fatalf("run.started %s: %v", evs[1].Payload, err)
		}
	})
}
