package events_test

import (
	"context"
	"database/sql"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// foreignInsert appends one event to runID as a client that is not
// agentctl would (no fence statement): chained to the tip, inside a
// transaction that first runs prelude (if any) and is rolled back, so
// the log is left as it was. It returns the INSERT's SQLSTATE ("" when
// the database took it).
func foreignInsert(t *testing.T, raw *sql.DB, runID, prelude string, args ...any) string {
	t.Helper()
	ctx := context.Background()
	tx, err := raw.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if prelude != "" {
		if _, err := tx.ExecContext(ctx, prelude, args...); err != nil {
			t.Fatalf("%s: %v", prelude, err)
		}
	}
	var seq int64
	var prev string
	if err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM events WHERE run_id = $1 ORDER BY seq DESC LIMIT 1`, runID).Scan(&seq, &prev); err != nil {
		t.Fatalf("tip of %s: %v", runID, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO events (run_id, seq, stream, type, payload, created_at, prev_hash, hash)
		VALUES ($1, $2, 'run', 'test.foreign', '{}', '2026-01-01T00:00:00Z', $3, 'forged')`, runID, seq+1, prev)
	if err == nil {
		return ""
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("foreign insert: %v", err)
	}
	return pe.Code
}

// TestLease_DatabaseRefusesForeignAppend (12e): the database itself fences
// every INSERT into events, whatever the client sends. While a run's lease
// is live, a client that did not name that lease (run, epoch, owner) in
// its transaction is refused (AG003), one that named an older epoch too
// (AG002); one that names the current lease may append. Once the lease is
// released or has expired, anyone may (a reconcile needs no lease).
func TestLease_DatabaseRefusesForeignAppend(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	a := testkit.OpenDB(t, dsn, events.Options{LeaseTTL: time.Minute})
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	ctx := context.Background()
	unlock, err := a.LockRun("run-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Append(ctx, "run-1", step("test.one"), nil); err != nil {
		t.Fatal(err)
	}
	const name = `SELECT set_config('agentctl.lease', $1, true)`
	cases := []struct {
		what, prelude string
		args          []any
		want          string
	}{
		{"no lease named", "", nil, "AG003"},
		{"another run's lease named", name, []any{"run-2 1 " + a.LeaseOwner()}, "AG003"},
		{"an older epoch named", name, []any{"run-1 0 " + a.LeaseOwner()}, "AG002"},
		{"another owner named", name, []any{"run-1 1 someone/1/00"}, "AG002"},
		{"the current lease named", name, []any{"run-1 1 " + a.LeaseOwner()}, ""},
	}
	for _, c := range cases {
		if got := foreignInsert(t, raw, "run-1", c.prelude, c.args...); got != c.want {
			t.Errorf("foreign append to a leased run, %s: SQLSTATE %q, want %q", c.what, got, c.want)
		}
	}
	// agentctl's own appends pass the trigger: with the lease, and
	// without one once it is released.
	if _, err := a.Append(ctx, "run-1", step("test.two"), nil); err != nil {
		t.Fatalf("append by the holder: %v", err)
	}
	expireLease(t, a, "run-1")
	if got := foreignInsert(t, raw, "run-1", ""); got != "" {
		t.Errorf("foreign append to a run whose lease expired: SQLSTATE %q, want none", got)
	}
	unlock()
	if got := foreignInsert(t, raw, "run-1", ""); got != "" {
		t.Errorf("foreign append to a released run: SQLSTATE %q, want none", got)
	}
	if _, err := a.Append(ctx, "run-1", step("test.reconcile"), nil); err != nil {
		t.Fatalf("append without a lease after release: %v", err)
	}
	if n, err := a.VerifyRun(ctx, "run-1"); err != nil || n != 3 {
		t.Fatalf("VerifyRun = %d, %v; want agentctl's 3 events only", n, err)
	}
}

// withApp is dsn with application_name set, so that a test can find (and
// terminate) the backends of one DB and no other.
func withApp(t *testing.T, dsn, app string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// terminateBackends ends every server session of application app (as a
// failover, a pooler or an operator would) and returns how many.
func terminateBackends(t *testing.T, raw *sql.DB, app string) int {
	t.Helper()
	var n int
	if err := raw.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE application_name = $1 AND pid <> pg_backend_pid()`, app).Scan(&n); err != nil {
		t.Fatalf("terminate %s's backends: %v", app, err)
	}
	return n
}

// TestLease_SurvivesTerminatedConnections (5, 6): a writer whose every
// server session is terminated keeps its leases. Another process can
// neither lock nor claim its runs, nor append to them; the writer's
// heartbeat renews them on new connections, and its appends go on, the
// failures retried (counted) rather than returned.
func TestLease_SurvivesTerminatedConnections(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	opts := events.Options{LeaseTTL: time.Minute}
	a := testkit.OpenDB(t, withApp(t, dsn, "lease-a"), opts)
	b := testkit.OpenDB(t, dsn, opts)
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	ctx := context.Background()
	unlock, err := a.LockRun("run-1")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	if _, err := a.Append(ctx, "run-1", step("test.one"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.SQL().Exec(`INSERT INTO runs (run_id, workflow, workflow_digest, mode, state, started_at, updated_at)
		VALUES ('run-1', 'wf', 'd', 'run', 'running', 'now', 'now')`); err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		if n := terminateBackends(t, raw, "lease-a"); n == 0 {
			t.Fatalf("round %d: a has no backend to terminate", round)
		}
		if _, err := b.LockRun("run-1"); !errors.Is(err, events.ErrRunBusy) {
			t.Fatalf("round %d: b.LockRun after a's sessions ended = %v; want ErrRunBusy", round, err)
		}
		if got, err := b.ClaimRuns(ctx, 10, nil); err != nil || len(got) != 0 {
			t.Fatalf("round %d: b.ClaimRuns after a's sessions ended = %+v, %v; want nothing", round, got, err)
		}
		if _, err := b.Append(ctx, "run-1", step("test.intruder"), nil); !errors.Is(err, events.ErrRunBusy) {
			t.Fatalf("round %d: b.Append = %v; want ErrRunBusy", round, err)
		}
		before := readLease(t, b, "run-1")
		terminateBackends(t, raw, "lease-a")
		if lost := a.RenewLeases(ctx); lost != 0 {
			t.Fatalf("round %d: a lost %d lease(s) renewing after its sessions ended", round, lost)
		}
		after := readLease(t, b, "run-1")
		if after.Epoch != 1 || *after.Owner != a.LeaseOwner() || !after.Expires.After(*before.Expires) {
			t.Fatalf("round %d: lease after a's renewal = %+v (before %+v); want a's, epoch 1, later expiry", round, after, before)
		}
		terminateBackends(t, raw, "lease-a")
		if _, err := a.Append(ctx, "run-1", step("test.after"), nil); err != nil {
			t.Fatalf("round %d: a.Append after its sessions ended: %v", round, err)
		}
	}
	if n := a.LeaseLosses(); n != 0 {
		t.Fatalf("a.LeaseLosses = %d; want 0", n)
	}
	if a.TransientErrors() == 0 {
		t.Fatal("a.TransientErrors = 0; want the failures on terminated connections counted")
	}
	if n, err := a.VerifyRun(ctx, "run-1"); err != nil || n != 4 {
		t.Fatalf("VerifyRun = %d, %v; want 4 events, all a's", n, err)
	}
}
