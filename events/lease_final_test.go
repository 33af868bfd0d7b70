package events_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// TestLease_AppendFinalReleases: the run's last commit (AppendFinal)
// releases its lease in its own transaction: a commit that fails (here a
// compare-and-append conflict) leaves the lease held; one that commits
// deletes the row of a run that is over, no heartbeat counts it lost, and
// another process locks the run at once. (That the unlock after it sends
// nothing, TestQueuedRunCost counts on the wire.)
func TestLease_AppendFinalReleases(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	if _, err := a.SQL().Exec(`INSERT INTO runs (run_id, workflow, workflow_digest, mode, state, started_at, updated_at)
		VALUES ('run-f', 'wf', 'd', 'run', 'succeeded', 'now', 'now')`); err != nil {
		t.Fatal(err)
	}
	unlock, err := a.LockRun("run-f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "run-f", step("test.one"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := a.AppendFinal(ctx, "run-f", 5, step("test.final"), nil); !errors.Is(err, events.ErrConflict) {
		t.Fatalf("AppendFinal after a seq the log is not at = %v; want ErrConflict", err)
	}
	if l := readLease(t, a, "run-f"); l.Owner == nil || *l.Owner != a.LeaseOwner() || l.Epoch != 1 {
		t.Fatalf("lease after a failed AppendFinal = %+v; want still a's at epoch 1", l)
	}
	if _, err := a.AppendFinal(ctx, "run-f", 1, step("test.final"), nil); err != nil {
		t.Fatalf("AppendFinal: %v", err)
	}
	var rows int
	if err := a.SQL().Get(&rows, `SELECT count(*) FROM run_leases WHERE run_id = 'run-f'`); err != nil || rows != 0 {
		t.Fatalf("run_leases rows of a run over after AppendFinal = %d, %v; want 0", rows, err)
	}
	if lost := a.RenewLeases(ctx); lost != 0 || a.LeaseLosses() != 0 {
		t.Fatalf("renewal after AppendFinal lost %d (losses %d); want none", lost, a.LeaseLosses())
	}
	unlock()
	unlockB, err := b.LockRun("run-f")
	if err != nil {
		t.Fatalf("b.LockRun after a's AppendFinal: %v", err)
	}
	unlockB()
}
