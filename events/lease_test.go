package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// leaseRow is a run's row in run_leases.
type leaseRow struct {
	Owner   *string    `db:"owner"`
	Epoch   int64      `db:"lease_epoch"`
	Expires *time.Time `db:"lease_expires_at"`
}

func readLease(t *testing.T, db *events.DB, runID string) leaseRow {
	t.Helper()
	var r leaseRow
	if err := db.SQL().Get(&r, `SELECT owner, lease_epoch, lease_expires_at FROM run_leases WHERE run_id = ?`, runID); err != nil {
		t.Fatalf("read lease of %s: %v", runID, err)
	}
	return r
}

// expireLease moves runID's expiry into the past, as a paused holder
// would find it: the test never sleeps past a TTL.
func expireLease(t *testing.T, db *events.DB, runID string) {
	t.Helper()
	if _, err := db.SQL().Exec(`UPDATE run_leases SET lease_expires_at = now() - interval '1 second' WHERE run_id = ?`, runID); err != nil {
		t.Fatalf("expire lease of %s: %v", runID, err)
	}
}

func step(typ string) []events.Record { return []events.Record{{Stream: "run", Type: typ}} }

// twoProcesses opens one PostgreSQL database twice: two writers, as two
// worker processes would be.
func twoProcesses(t *testing.T) (a, b *events.DB) {
	dsn := testkit.PostgresDB(t)
	opts := events.Options{LeaseTTL: time.Minute}
	return testkit.OpenDB(t, dsn, opts), testkit.OpenDB(t, dsn, opts)
}

// TestLease_FencingAfterTakeover: a writer whose lease expired and was
// taken over cannot append any more (the check runs in the append's
// transaction), the loss is counted once, the new holder appends at the
// next epoch, a writer without a lease is refused while one is live, and
// the old holder's unlock leaves the new lease alone.
func TestLease_FencingAfterTakeover(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	unlockA, err := a.LockRun("run-1")
	if err != nil {
		t.Fatalf("a.LockRun: %v", err)
	}
	if _, err := a.Append(ctx, "run-1", step("test.one"), nil); err != nil {
		t.Fatalf("a.Append: %v", err)
	}
	if got := readLease(t, a, "run-1"); got.Owner == nil || *got.Owner != a.LeaseOwner() || got.Epoch != 1 {
		t.Fatalf("lease = %+v; want owner %s at epoch 1", got, a.LeaseOwner())
	}
	if _, err := b.LockRun("run-1"); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("b.LockRun of a live lease = %v; want ErrRunBusy", err)
	}
	if _, err := b.Append(ctx, "run-1", step("test.intruder"), nil); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("b.Append without a lease while a holds one = %v; want ErrRunBusy", err)
	}

	expireLease(t, a, "run-1")
	unlockB, err := b.LockRun("run-1")
	if err != nil {
		t.Fatalf("b.LockRun of an expired lease: %v", err)
	}
	if got := readLease(t, b, "run-1"); *got.Owner != b.LeaseOwner() || got.Epoch != 2 {
		t.Fatalf("lease after takeover = %+v; want owner %s at epoch 2", got, b.LeaseOwner())
	}
	if _, err := b.Append(ctx, "run-1", step("test.two"), nil); err != nil {
		t.Fatalf("b.Append at epoch 2: %v", err)
	}
	for i := 0; i < 2; i++ {
		_, err := a.Append(ctx, "run-1", step("test.late"), nil)
		var le *events.LeaseLostError
		if !errors.Is(err, events.ErrLeaseLost) || !errors.As(err, &le) || le.RunID != "run-1" || le.Epoch != 1 {
			t.Fatalf("late append %d of a = %v; want the lease of run-1 lost at epoch 1", i, err)
		}
	}
	if n := a.LeaseLosses(); n != 1 {
		t.Fatalf("a.LeaseLosses = %d; want 1", n)
	}
	if n := b.LeaseLosses(); n != 0 {
		t.Fatalf("b.LeaseLosses = %d; want 0", n)
	}
	if n, err := b.VerifyRun(ctx, "run-1"); err != nil || n != 2 {
		t.Fatalf("VerifyRun = %d, %v; want 2 events (a's one, b's one)", n, err)
	}
	unlockA()
	if got := readLease(t, b, "run-1"); got.Owner == nil || *got.Owner != b.LeaseOwner() {
		t.Fatalf("lease after the old holder's unlock = %+v; want still %s", got, b.LeaseOwner())
	}
	unlockB()
	if got := readLease(t, b, "run-1"); got.Owner != nil || got.Expires != nil || got.Epoch != 2 {
		t.Fatalf("lease after release = %+v; want no owner, no expiry, epoch 2", got)
	}
	// Released: a writer without a lease may append again.
	if _, err := b.Append(ctx, "run-1", step("test.reconcile"), nil); err != nil {
		t.Fatalf("append without a lease after release: %v", err)
	}
}

// TestLease_HeartbeatRenewsAndLoses: a renewal moves the expiry forward
// while the lease is current; once it expired (a paused process), the
// renewal finds no row, the lease is lost and the next append fails
// before writing.
func TestLease_HeartbeatRenewsAndLoses(t *testing.T) {
	a, _ := twoProcesses(t)
	ctx := context.Background()
	unlock, err := a.LockRun("run-hb")
	if err != nil {
		t.Fatalf("LockRun: %v", err)
	}
	defer unlock()
	if _, err := a.SQL().Exec(`UPDATE run_leases SET lease_expires_at = now() + interval '1 second' WHERE run_id = 'run-hb'`); err != nil {
		t.Fatal(err)
	}
	before := readLease(t, a, "run-hb")
	if lost := a.RenewLeases(ctx); lost != 0 {
		t.Fatalf("RenewLeases of a current lease lost %d", lost)
	}
	if after := readLease(t, a, "run-hb"); !after.Expires.After(*before.Expires) || after.Epoch != 1 {
		t.Fatalf("renewal: expiry %v -> %v, epoch %d; want later, epoch 1", before.Expires, after.Expires, after.Epoch)
	}
	expireLease(t, a, "run-hb")
	if lost := a.RenewLeases(ctx); lost != 1 {
		t.Fatalf("RenewLeases of an expired lease lost %d; want 1", lost)
	}
	if _, err := a.Append(ctx, "run-hb", step("test.late"), nil); !errors.Is(err, events.ErrLeaseLost) {
		t.Fatalf("append after the lease was lost = %v; want ErrLeaseLost", err)
	}
	if ok, err := a.RunExists(ctx, "run-hb"); err != nil || ok {
		t.Fatalf("RunExists = %v, %v; want nothing written", ok, err)
	}
	if n := a.LeaseLosses(); n != 1 {
		t.Fatalf("LeaseLosses = %d; want 1", n)
	}
}

// TestLease_ClaimRuns: a worker claims queued runs and running runs with
// no live lease, never finished ones nor ones another holds; its LockRun
// adopts the claim at the same epoch; a claim given back is claimable by
// another at the next epoch.
func TestLease_ClaimRuns(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	for _, r := range []struct{ id, mode, state string }{
		{"run-1", "run", "queued"}, {"run-2", "run", "queued"}, {"run-3", "run", "running"},
		{"run-4", "run", "succeeded"}, {"run-5", "replay", "running"},
	} {
		if _, err := a.SQL().Exec(`INSERT INTO runs (run_id, workflow, workflow_digest, mode, state, started_at, updated_at)
			VALUES (?, 'wf', 'd', ?, ?, 'now', 'now')`, r.id, r.mode, r.state); err != nil {
			t.Fatalf("insert run %s: %v", r.id, err)
		}
	}
	got, err := a.ClaimRuns(ctx, 2, nil)
	if err != nil || len(got) != 2 || got[0] != (events.Claim{RunID: "run-1", State: "queued", Epoch: 1}) || got[1].RunID != "run-2" {
		t.Fatalf("a.ClaimRuns(2) = %+v, %v; want run-1, run-2 queued at epoch 1", got, err)
	}
	got, err = b.ClaimRuns(ctx, 10, nil)
	if err != nil || len(got) != 1 || got[0] != (events.Claim{RunID: "run-3", State: "running", Epoch: 1}) {
		t.Fatalf("b.ClaimRuns = %+v, %v; want only run-3 (running, no lease)", got, err)
	}
	unlock, err := a.LockRun("run-1")
	if err != nil {
		t.Fatalf("LockRun of a claimed run: %v", err)
	}
	if l := readLease(t, a, "run-1"); l.Epoch != 1 || *l.Owner != a.LeaseOwner() {
		t.Fatalf("adopted lease = %+v; want epoch 1 owned by a", l)
	}
	if _, err := a.LockRun("run-1"); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("second LockRun in one process = %v; want ErrRunBusy", err)
	}
	unlock()
	a.ReleaseClaim("run-2")
	got, err = b.ClaimRuns(ctx, 10, []string{"run-1"})
	if err != nil || len(got) != 1 || got[0] != (events.Claim{RunID: "run-2", State: "queued", Epoch: 2}) {
		t.Fatalf("b.ClaimRuns after a gave run-2 back, except run-1 = %+v, %v; want run-2 at epoch 2", got, err)
	}
}

// TestLease_DeadOwnerWaitsForExpiry: liveness is the lease alone. A lease
// whose owner has no session (a process that died, or one whose
// connections all dropped: its migration-0002 advisory lock is gone) is
// not taken before it expires, by LockRun or ClaimRuns, and an appender
// without a lease is refused meanwhile; once it expired, both take it at
// the next epoch.
func TestLease_DeadOwnerWaitsForExpiry(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	for _, id := range []string{"run-dead", "run-dead-queued"} {
		if _, err := a.SQL().Exec(`INSERT INTO run_leases (run_id, owner, owner_key, lease_epoch, lease_expires_at)
			VALUES (?, 'crashed/1/00', 4242, 7, now() + interval '1 hour')`, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.SQL().Exec(`INSERT INTO runs (run_id, workflow, workflow_digest, mode, state, started_at, updated_at)
		VALUES ('run-dead-queued', 'wf', 'd', 'run', 'running', 'now', 'now')`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Append(ctx, "run-dead", step("test.reconcile"), nil); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("append without a lease over a dead owner's unexpired lease: %v; want ErrRunBusy", err)
	}
	if _, err := b.LockRun("run-dead"); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("LockRun of a dead owner's unexpired lease: %v; want ErrRunBusy", err)
	}
	if got, err := a.ClaimRuns(ctx, 10, nil); err != nil || len(got) != 0 {
		t.Fatalf("ClaimRuns over a dead owner's unexpired lease = %+v, %v; want nothing", got, err)
	}
	expireLease(t, a, "run-dead")
	expireLease(t, a, "run-dead-queued")
	unlockB, err := b.LockRun("run-dead")
	if err != nil {
		t.Fatalf("LockRun of a dead owner's expired lease: %v", err)
	}
	defer unlockB()
	if l := readLease(t, b, "run-dead"); *l.Owner != b.LeaseOwner() || l.Epoch != 8 {
		t.Fatalf("lease = %+v; want b's at epoch 8", l)
	}
	got, err := a.ClaimRuns(ctx, 10, nil)
	if err != nil || len(got) != 1 || got[0] != (events.Claim{RunID: "run-dead-queued", State: "running", Epoch: 8}) {
		t.Fatalf("ClaimRuns = %+v, %v; want the dead owner's running run at epoch 8", got, err)
	}
}

// TestLease_BusyNamesOwnerAndExpiry: LockRun's refusal of a live lease (as
// a resume right after a kill -9 meets it: the dead writer's lease runs
// to its expiry) still wraps ErrRunBusy, and names the owner and the
// expiry (RFC 3339, UTC) with what to do.
func TestLease_BusyNamesOwnerAndExpiry(t *testing.T) {
	a, b := twoProcesses(t)
	unlock, err := a.LockRun("run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	row := readLease(t, a, "run-1")
	_, err = b.LockRun("run-1")
	if !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("LockRun of a live lease = %v; want ErrRunBusy", err)
	}
	until := row.Expires.UTC().Format(time.RFC3339)
	want := "run-1 (leased by " + a.LeaseOwner() + " until " + until + "; if that process is gone, retry after " + until + "; `agentctl runs list` shows the owner)"
	if msg := err.Error(); !strings.HasSuffix(msg, want) {
		t.Fatalf("LockRun refusal = %q; want it to end %q", msg, want)
	}
}

// TestLease_ClaimLapsedBeforeLockRun: a claim that expired and was taken
// over before this process's LockRun adopted it (the process was paused
// in between) is reported lost, not handed out.
func TestLease_ClaimLapsedBeforeLockRun(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	if _, err := a.SQL().Exec(`INSERT INTO runs (run_id, workflow, workflow_digest, mode, state, started_at, updated_at)
		VALUES ('run-q', 'wf', 'd', 'run', 'queued', 'now', 'now')`); err != nil {
		t.Fatal(err)
	}
	if got, err := a.ClaimRuns(ctx, 1, nil); err != nil || len(got) != 1 {
		t.Fatalf("ClaimRuns = %+v, %v", got, err)
	}
	expireLease(t, a, "run-q")
	events.AgeClaim(a, "run-q") // a's clock went on too while it was paused
	if got, err := b.ClaimRuns(ctx, 1, nil); err != nil || len(got) != 1 || got[0].Epoch != 2 {
		t.Fatalf("b.ClaimRuns of the lapsed claim = %+v, %v; want it at epoch 2", got, err)
	}
	_, err := a.LockRun("run-q")
	var le *events.LeaseLostError
	if !errors.As(err, &le) || le.Epoch != 1 || a.LeaseLosses() != 1 {
		t.Fatalf("LockRun of a lapsed claim = %v (losses %d); want the lease lost at epoch 1", err, a.LeaseLosses())
	}
}

// TestLease_RunHeldProbeTakesNothing: RunHeld (inspect --follow's probe)
// sees a live lease and a released one without claiming: the epoch does
// not move, and a run with no lease row is not held.
func TestLease_RunHeldProbeTakesNothing(t *testing.T) {
	a, b := twoProcesses(t)
	ctx := context.Background()
	unlock, err := a.LockRun("run-1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []bool{true, true} {
		if held, err := b.RunHeld(ctx, "run-1"); err != nil || held != want {
			t.Fatalf("RunHeld while a holds the lease = %v, %v; want %v", held, err, want)
		}
	}
	unlock()
	if held, err := b.RunHeld(ctx, "run-1"); err != nil || held {
		t.Fatalf("RunHeld after release = %v, %v; want false", held, err)
	}
	if got := readLease(t, b, "run-1"); got.Epoch != 1 || got.Owner != nil {
		t.Fatalf("lease after three probes = %+v; want epoch 1 (the one claim), no owner", got)
	}
	if held, err := b.RunHeld(ctx, "run-unknown"); err != nil || held {
		t.Fatalf("RunHeld of a run without a lease row = %v, %v; want false", held, err)
	}
}

// TestRunHeld_SQLite: on SQLite the probe is the run lock, given back.
func TestRunHeld_SQLite(t *testing.T) {
	db := testkit.OpenDB(t, t.TempDir()+"/a.db", events.Options{})
	ctx := context.Background()
	unlock, err := db.LockRun("run-1")
	if err != nil {
		t.Fatal(err)
	}
	if held, err := db.RunHeld(ctx, "run-1"); err != nil || !held {
		t.Fatalf("RunHeld while locked = %v, %v; want true", held, err)
	}
	unlock()
	if held, err := db.RunHeld(ctx, "run-1"); err != nil || held {
		t.Fatalf("RunHeld after unlock = %v, %v; want false", held, err)
	}
	if _, err := db.LockRun("run-1"); err != nil {
		t.Fatalf("LockRun after the probe: %v (the probe kept the lock)", err)
	}
}

// TestRunHeld_SQLiteOtherOpen: a second open of the file (another process,
// as `runs list` is to a run) sees the run's lock, and its probe leaves
// the lock free for a writer after it.
func TestRunHeld_SQLiteOtherOpen(t *testing.T) {
	path := t.TempDir() + "/a.db"
	a := testkit.OpenDB(t, path, events.Options{})
	b := testkit.OpenDB(t, path, events.Options{})
	ctx := context.Background()
	if held, err := b.RunHeld(ctx, "run-2"); err != nil || held {
		t.Fatalf("RunHeld of a free run = %v, %v; want false", held, err)
	}
	unlock, err := a.LockRun("run-2")
	if err != nil {
		t.Fatalf("LockRun after another open's probe: %v (the probe kept the lock)", err)
	}
	if held, err := b.RunHeld(ctx, "run-2"); err != nil || !held {
		t.Fatalf("RunHeld while another open holds the run = %v, %v; want true", held, err)
	}
	unlock()
	if held, err := b.RunHeld(ctx, "run-2"); err != nil || held {
		t.Fatalf("RunHeld after unlock = %v, %v; want false", held, err)
	}
	if _, err := a.LockRun("run-2"); err != nil {
		t.Fatalf("LockRun after the probes: %v", err)
	}
}

// TestLease_HeartbeatEveryThirdOfTTL: the holder's own heartbeat (no
// RenewLeases call by the test) renews its lease every TTL/3: within the
// first TTL the expiry moves at least twice, never sooner than TTL/3
// apart, and once the database's clock is past the first expiry the lease
// is still held (same owner, same epoch) and an append passes the fence.
func TestLease_HeartbeatEveryThirdOfTTL(t *testing.T) {
	const ttl = 3 * time.Second
	db := testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{LeaseTTL: ttl})
	unlock, err := db.LockRun("run-beat")
	if err != nil {
		t.Fatalf("LockRun: %v", err)
	}
	defer unlock()
	first := readLease(t, db, "run-beat")
	seen := []time.Time{*first.Expires}
	failsafe := time.After(30 * time.Second)
	poll := time.NewTicker(25 * time.Millisecond) // reads the lease row
	defer poll.Stop()
	for {
		var past bool
		if err := db.SQL().Get(&past, `SELECT now() > ?`, *first.Expires); err != nil {
			t.Fatal(err)
		}
		if r := readLease(t, db, "run-beat"); r.Expires != nil && !r.Expires.Equal(seen[len(seen)-1]) {
			seen = append(seen, *r.Expires)
		}
		if past {
			break
		}
		select {
		case <-poll.C:
		case <-failsafe:
			t.Fatal("the database's clock never passed the lease's first expiry (a failsafe)")
		}
	}
	if len(seen) < 3 {
		t.Fatalf("expiries seen within one TTL: %v; want at least two renewals (every TTL/3)", seen)
	}
	for i := 1; i < len(seen); i++ {
		if d := seen[i].Sub(seen[i-1]); d < ttl/3-200*time.Millisecond {
			t.Fatalf("renewed %v after the previous one; want every TTL/3 (%v): %v", d, ttl/3, seen)
		}
	}
	if r := readLease(t, db, "run-beat"); r.Owner == nil || *r.Owner != *first.Owner || r.Epoch != first.Epoch {
		t.Fatalf("lease after its first expiry: %+v; want still held as %+v", r, first)
	}
	if _, err := db.Append(context.Background(), "run-beat", step("test.after"), nil); err != nil {
		t.Fatalf("append past the first expiry: %v; want the renewed lease to pass the fence", err)
	}
	if n := db.LeaseLosses(); n != 0 {
		t.Fatalf("LeaseLosses = %d; want 0", n)
	}
}
