package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestPostgres_AppendIsOneRoundTrip: on PostgreSQL a lone append sends
// BEGIN, its fence, its event rows (one INSERT), projection writes and
// COMMIT as one pipelined batch: counted on the wire by a relay, with and
// without a lease held (before the pipeline: 9 round trips and 9
// statements here; now 1 and 7).
func TestPostgres_AppendIsOneRoundTrip(t *testing.T) {
	relay, dsn := testkit.NewPGRelay(t, testkit.PostgresDB(t))
	db := testkit.OpenDB(t, dsn, events.Options{})
	ctx := context.Background()
	apply := func(ctx context.Context, tx *events.Tx, evs []events.Event) error {
		for range 3 {
			if _, err := tx.Exec(ctx, `UPDATE runs SET updated_at = ? WHERE run_id = ?`, evs[0].CreatedAt, evs[0].RunID); err != nil {
				return err
			}
		}
		return nil
	}
	recs := []events.Record{{Stream: "run", Type: "test.a"}, {Stream: "run", Type: "test.b"}, {Stream: "run", Type: "test.c"}}
	for _, leased := range []bool{false, true} {
		run := "run-free"
		if leased {
			run = "run-leased"
			unlock, err := db.LockRun(run)
			if err != nil {
				t.Fatal(err)
			}
			defer unlock()
		}
		// The first append reads the tip and prepares the statements.
		if _, err := db.Append(ctx, run, recs, apply); err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			before, stmts := relay.RoundTrips(), relay.Statements()
			if _, err := db.Append(ctx, run, recs, apply); err != nil {
				t.Fatal(err)
			}
			if got := relay.RoundTrips() - before; got != 1 {
				t.Errorf("leased=%v append %d: %d round trips, want 1", leased, i, got)
			}
			// BEGIN, the fence, one INSERT of the 3 events, 3 updates, COMMIT.
			if got := relay.Statements() - stmts; got != 7 {
				t.Errorf("leased=%v append %d: %d statements, want 7", leased, i, got)
			}
		}
		if n, err := db.VerifyRun(ctx, run); err != nil || n != 12 {
			t.Fatalf("VerifyRun(%s) = %d, %v; want 12 events", run, n, err)
		}
	}
}

// TestPostgres_PipelinedErrorsReachTheirMember: a statement that fails
// inside the pipelined batch fails the append that queued it, nothing of it
// commits, and the next append of the run goes on from the committed tip.
func TestPostgres_PipelinedErrorsReachTheirMember(t *testing.T) {
	db := testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{})
	ctx := context.Background()
	rec := []events.Record{{Stream: "run", Type: "test.step"}}
	if _, err := db.Append(ctx, "r", rec, nil); err != nil {
		t.Fatal(err)
	}
	bad := func(ctx context.Context, tx *events.Tx, _ []events.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return err
	}
	if _, err := db.Append(ctx, "r", rec, bad); err == nil {
		t.Fatal("append with a failing projection statement succeeded")
	} else if !errors.As(err, new(*events.Error)) {
		t.Fatalf("err = %v (%T); want an *events.Error naming the statement", err, err)
	}
	evs, err := db.Append(ctx, "r", rec, nil)
	if err != nil || len(evs) != 1 || evs[0].Seq != 2 {
		t.Fatalf("next append = %v, %v; want seq 2", evs, err)
	}
	if n, err := db.VerifyRun(ctx, "r"); err != nil || n != 2 {
		t.Fatalf("VerifyRun = %d, %v; want 2 events", n, err)
	}
}

// TestPostgres_LargeAppend: one append of 8,000 events (≈ 10 MB of
// statements and as many results) goes through the pipeline without the
// client and the server each waiting for the other to read.
func TestPostgres_LargeAppend(t *testing.T) {
	db := testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{})
	ctx := context.Background()
	body := strings.Repeat("x", 1000)
	recs := make([]events.Record, 8000)
	for i := range recs {
		recs[i] = events.Record{Stream: "run", Type: "test.step", Payload: map[string]string{"body": body}}
	}
	evs, err := db.Append(ctx, "big", recs, nil)
	if err != nil || len(evs) != len(recs) {
		t.Fatalf("append = %d events, %v", len(evs), err)
	}
	if n, err := db.VerifyRun(ctx, "big"); err != nil || n != int64(len(recs)) {
		t.Fatalf("VerifyRun = %d, %v", n, err)
	}
}

// TestPostgres_GroupRecoversFromAnAbortedMember: in one group commit on a
// fresh connection, a member whose statement fails when executed (not
// when prepared) aborts the transaction; the members after it — one with a
// statement the connection never prepared — still commit, and so do later
// appends on the same connections (the statement cache stays in step with
// the server).
func TestPostgres_GroupRecoversFromAnAbortedMember(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	db := testkit.OpenDB(t, dsn, events.Options{})
	ctx := context.Background()
	joined := make(chan bool, 8)
	events.SetQueuedHook(db, func(lead bool) { joined <- lead })
	rec := func(n int) []events.Record {
		r := make([]events.Record, n)
		for i := range r {
			r[i] = events.Record{Stream: "run", Type: "test.step"}
		}
		return r
	}
	divide := func(ctx context.Context, tx *events.Tx, _ []events.Event) error {
		_, err := tx.Exec(ctx, `SELECT 1 / (SELECT count(*) FROM runs WHERE run_id = 'none')`) // 22012 when run
		return err
	}
	type step struct {
		run   string
		recs  []events.Record
		apply events.Applier
	}
	// "stale" conflicts on the server: another handle appended to it, so
	// this one's cached tip is behind (23505 on the INSERT).
	if _, err := db.Append(ctx, "stale", rec(1), nil); err != nil {
		t.Fatal(err)
	}
	other := testkit.OpenDB(t, dsn, events.Options{})
	if _, err := other.Append(ctx, "stale", rec(1), nil); err != nil {
		t.Fatal(err)
	}
	steps := []step{{"lead", rec(1), nil}, {"x", rec(1), nil}, {"bad", rec(1), divide}, {"y", rec(3), nil},
		{"stale", rec(1), nil}, {"w", rec(1), nil}, {"z", rec(5), nil}}
	errs := make([]error, len(steps))
	done := make(chan int, len(steps))
	release := events.HoldWriter(db)
	for i, s := range steps {
		go func() { _, errs[i] = db.Append(ctx, s.run, s.recs, s.apply); done <- i }()
		<-joined
	}
	release()
	for range steps {
		<-done
	}
	events.SetQueuedHook(db, nil)
	for i, s := range steps {
		if (s.run == "bad" || s.run == "stale") != (errs[i] != nil) {
			t.Errorf("%s: err = %v", s.run, errs[i])
		}
	}
	if !errors.Is(errs[4], events.ErrConflict) {
		t.Errorf("stale: err = %v, want ErrConflict", errs[4])
	}
	for range 3 { // later appends, new statements included, on the same pool
		for _, run := range []string{"x", "y", "z", "w", "bad", "stale"} {
			if _, err := db.Append(ctx, run, rec(7), nil); err != nil {
				t.Fatalf("later append to %s: %v", run, err)
			}
		}
	}
}

// TestPostgres_GroupIsOneRoundTrip: a group commit of several members
// sends every member's statements, each in its savepoint, with the COMMIT:
// one round trip for the batch, not one per member plus the COMMIT.
func TestPostgres_GroupIsOneRoundTrip(t *testing.T) {
	relay, dsn := testkit.NewPGRelay(t, testkit.PostgresDB(t))
	db := testkit.OpenDB(t, dsn, events.Options{})
	ctx := context.Background()
	recs := []events.Record{{Stream: "run", Type: "test.a"}, {Stream: "run", Type: "test.b"}}
	runs := []string{"g-lead", "g1", "g2", "g3", "g4"}
	for _, run := range runs { // the tips known, the statements prepared
		if _, err := db.Append(ctx, run, recs, nil); err != nil {
			t.Fatal(err)
		}
	}
	joined := make(chan bool, len(runs))
	events.SetQueuedHook(db, func(lead bool) { joined <- lead })
	defer events.SetQueuedHook(db, nil)
	// The first group prepares the savepoint statements on the connection
	// (a round trip of its own); the second is measured.
	for round := range 2 {
		before, commits := relay.RoundTrips(), db.CommitStats().Commits
		errs := make([]error, len(runs))
		done := make(chan int, len(runs))
		release := events.HoldWriter(db) // the leader commits alone; the four others queue behind it
		for i, run := range runs {
			go func() { _, errs[i] = db.Append(ctx, run, recs, nil); done <- i }()
			<-joined
		}
		release()
		for range runs {
			<-done
		}
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: append to %s: %v", round, runs[i], err)
			}
		}
		if got := db.CommitStats().Commits - commits; got != 2 {
			t.Fatalf("round %d: commits = %d; want 2 (the leader's, then the group of four)", round, got)
		}
		if got := relay.RoundTrips() - before; round == 1 && got != 2 {
			t.Errorf("round trips = %d; want 2 (one per commit)", got)
		}
	}
	for _, run := range runs {
		if n, err := db.VerifyRun(ctx, run); err != nil || n != 6 {
			t.Fatalf("VerifyRun(%s) = %d, %v; want 6 events", run, n, err)
		}
	}
}
