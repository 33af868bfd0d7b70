package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/worker"
)

// TestWorker_LeaseTakeover (PostgreSQL): while worker A's at_most_once
// call is executing, A's lease on the run passes to another owner (as
// when A was paused past its TTL). A's outcome is refused by the fence:
// A reports lease_lost, counts one loss, and the run has no outcome from
// A. Once the intruder's lease lapses, worker B claims the running run
// and resumes it by the rules: the call was dispatched with no outcome,
// so the run ends uncertain and the server executed it exactly once.
func TestWorker_LeaseTakeover(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	a := testkit.OpenDB(t, dsn, events.Options{LeaseTTL: time.Minute})
	b := testkit.OpenDB(t, dsn, events.Options{LeaseTTL: time.Minute})
	ctx := context.Background()
	tool := actTool()
	act := tool.Handler
	calls := 0
	tool.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		calls++
		if _, err := b.SQL().ExecContext(ctx, `UPDATE run_leases SET owner = 'intruder', lease_epoch = lease_epoch + 1,
			lease_expires_at = now() + interval '1 minute'`); err != nil {
			t.Errorf("take the lease over: %v", err)
		}
		return act(ctx, c)
	}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	wf := mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`))
	id, err := (&workflow.Runner{DB: a}).Submit(ctx, wf, map[string]any{}, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	newRunner := func() *workflow.Runner { return &workflow.Runner{} }
	outA, err := (&worker.Worker{DB: a, Drain: true, Name: "worker-a", NewRunner: newRunner}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(outA) != 1 || outA[0].State != worker.StateLeaseLost || outA[0].Error == nil ||
		*outA[0].Error != "run "+id+": lease lost at epoch 1; another worker owns it" {
		t.Fatalf("worker A = %+v; want run %s lease_lost at epoch 1", outA, id)
	}
	if n := a.LeaseLosses(); n != 1 {
		t.Fatalf("A's LeaseLosses = %d; want 1", n)
	}
	// A's log ends at the request it sent: neither the response nor an
	// outcome was written after the lease passed on.
	if lines := describeRun(t, a, id); lines[len(lines)-1] != "mcp.request out tools/call prepared->dispatched" {
		t.Fatalf("A wrote past its lease: the log ends %q", lines[len(lines)-1])
	}

	// The intruder dies: its lease lapses, B takes the run over.
	if _, err := b.SQL().Exec(`UPDATE run_leases SET lease_expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	var resumed []string
	var epochB int64
	var ownerB *string
	outB, err := (&worker.Worker{DB: b, Drain: true, Name: "worker-b", NewRunner: newRunner,
		Started: func(id string, r bool) {
			if r {
				resumed = append(resumed, id)
			}
			if err := b.SQL().QueryRow(`SELECT lease_epoch, owner FROM run_leases WHERE run_id = $1`, id).Scan(&epochB, &ownerB); err != nil {
				t.Errorf("B's lease: %v", err)
			}
		}}).Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(outB) != 1 || len(resumed) != 1 || outB[0].State != workflow.StateUncertain || !outB[0].Resumed {
		t.Fatalf("worker B = %+v (resumed %v); want run %s resumed and uncertain", outB, resumed, id)
	}
	if calls != 1 || srv.Stats().Executed["act"] != 1 {
		t.Fatalf("the server executed act %d times (handler %d); want once", srv.Stats().Executed["act"], calls)
	}
	if n, err := b.VerifyRun(ctx, id); err != nil || n == 0 {
		t.Fatalf("VerifyRun = %d, %v", n, err)
	}
	if epochB != 3 || ownerB == nil || *ownerB != b.LeaseOwner() {
		t.Fatalf("lease while B ran = epoch %d owner %v; want epoch 3 (A, intruder, B) held by B", epochB, ownerB)
	}
	// The run is over: B's release took its row.
	var rows int
	if err := b.SQL().QueryRow(`SELECT count(*) FROM run_leases WHERE run_id = $1`, id).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("lease rows of %s after B = %d, %v; want none", id, rows, err)
	}
}
