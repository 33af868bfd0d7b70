package events_test

import (
	"context"
	"errors"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// countLeaseRows counts the run_leases rows of runID (0 or 1).
func countLeaseRows(t *testing.T, db *events.DB, runID string) int {
	t.Helper()
	var n int
	if err := db.SQL().Get(&n, `SELECT count(*) FROM run_leases WHERE run_id = ?`, runID); err != nil {
		t.Fatalf("count lease rows of %s: %v", runID, err)
	}
	return n
}

// TestLease_NewRunLeaseRidesFirstCommit: a new run's lease (LockNewRun) is
// inserted by the run's first commit, not by a commit of its own: before
// it there is no row, after it the row names this process at epoch 1 and
// another process can neither lock nor append; the whole run costs its
// appends' commits only.
func TestLease_NewRunLeaseRidesFirstCommit(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	before := a.CommitStats().Commits
	unlock, err := a.LockNewRun("run-new")
	if err != nil {
		t.Fatalf("LockNewRun: %v", err)
	}
	if n := countLeaseRows(t, a, "run-new"); n != 0 {
		t.Fatalf("lease rows before the first commit = %d; want 0", n)
	}
	if _, err := a.LockNewRun("run-new"); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("second LockNewRun in one process = %v; want ErrRunBusy", err)
	}
	if _, err := a.AppendAfter(ctx, "run-new", 0, step("test.first"), nil); err != nil {
		t.Fatalf("first append: %v", err)
	}
	if got := readLease(t, a, "run-new"); got.Owner == nil || *got.Owner != a.LeaseOwner() || got.Epoch != 1 {
		t.Fatalf("lease after the first commit = %+v; want owner %s at epoch 1", got, a.LeaseOwner())
	}
	if _, err := b.LockRun("run-new"); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("b.LockRun of the new run = %v; want ErrRunBusy", err)
	}
	if _, err := b.Append(ctx, "run-new", step("test.intruder"), nil); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("b.Append to the new run = %v; want ErrRunBusy", err)
	}
	if _, err := a.AppendFinal(ctx, "run-new", 1, step("test.last"), nil); err != nil {
		t.Fatalf("final append: %v", err)
	}
	unlock()
	if got := a.CommitStats().Commits - before; got != 2 {
		t.Fatalf("commits for lock, two appends and unlock = %d; want 2", got)
	}
	if got := readLease(t, a, "run-new"); got.Owner != nil {
		t.Fatalf("lease after the final commit = %+v; want released", got)
	}
	if n, err := a.VerifyRun(ctx, "run-new"); err != nil || n != 2 {
		t.Fatalf("VerifyRun = %d, %v; want 2 events", n, err)
	}
}

// TestLease_NewRunTakenIdRefused: LockNewRun of an id that another process
// holds fails the first commit on the lease row's key; nothing of it is
// written, and its unlock leaves the holder's lease alone.
func TestLease_NewRunTakenIdRefused(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	unlockA, err := a.LockRun("run-taken")
	if err != nil {
		t.Fatalf("a.LockRun: %v", err)
	}
	defer unlockA()
	if _, err := a.Append(ctx, "run-taken", step("test.one"), nil); err != nil {
		t.Fatalf("a.Append: %v", err)
	}
	unlockB, err := b.LockNewRun("run-taken")
	if err != nil {
		t.Fatalf("b.LockNewRun: %v (it asks nothing of the database)", err)
	}
	if _, err := b.AppendAfter(ctx, "run-taken", 0, step("test.two"), nil); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("b's first append = %v; want ErrRunBusy", err)
	}
	unlockB()
	if got := readLease(t, a, "run-taken"); got.Owner == nil || *got.Owner != a.LeaseOwner() || got.Epoch != 1 {
		t.Fatalf("a's lease after b gave up = %+v; want a's at epoch 1", got)
	}
	if n, err := a.VerifyRun(ctx, "run-taken"); err != nil || n != 1 {
		t.Fatalf("VerifyRun = %d, %v; want a's one event", n, err)
	}
}

// TestLease_ExpiredUntakenLeaseFences: a writer whose lease expired
// cannot append even while nobody took the run over (the events trigger
// checks the lease the transaction names, migration 0012); the loss is
// counted once.
func TestLease_ExpiredUntakenLeaseFences(t *testing.T) {
	a, _ := twoProcesses(t)
	ctx := context.Background()
	unlock, err := a.LockRun("run-lapsed")
	if err != nil {
		t.Fatalf("LockRun: %v", err)
	}
	defer unlock()
	if _, err := a.Append(ctx, "run-lapsed", step("test.one"), nil); err != nil {
		t.Fatalf("Append: %v", err)
	}
	expireLease(t, a, "run-lapsed")
	for i := 0; i < 2; i++ {
		_, err := a.Append(ctx, "run-lapsed", step("test.late"), nil)
		var le *events.LeaseLostError
		if !errors.As(err, &le) || le.RunID != "run-lapsed" || le.Epoch != 1 {
			t.Fatalf("append %d after the expiry = %v; want the lease of run-lapsed lost at epoch 1", i, err)
		}
	}
	if n := a.LeaseLosses(); n != 1 {
		t.Fatalf("LeaseLosses = %d; want 1", n)
	}
	if n, err := a.VerifyRun(ctx, "run-lapsed"); err != nil || n != 1 {
		t.Fatalf("VerifyRun = %d, %v; want 1 event", n, err)
	}
}
