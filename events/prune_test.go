package events_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
)

func appendType(tb testing.TB, db *events.DB, run, typ string) {
	tb.Helper()
	if _, err := db.Append(context.Background(), run, []events.Record{{Stream: "run", Type: typ, Payload: map[string]string{}}}, nil); err != nil {
		tb.Fatalf("append %s to %s: %v", typ, run, err)
	}
}

func count(tb testing.TB, db *events.DB, run string) int {
	tb.Helper()
	var n int
	if err := db.SQL().Get(&n, `SELECT COUNT(*) FROM events WHERE run_id = ?`, run); err != nil {
		tb.Fatal(err)
	}
	return n
}

// TestPrune_OnlyTheGrantedPath: events leave the log only through Prune,
// only for finished runs, and a grant cannot outlive its transaction.
func TestPrune_OnlyTheGrantedPath(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t, t.TempDir()+"/a.db")
	for _, run := range []string{"run-a", "run-b", "run-c"} {
		appendType(t, db, run, "run.created")
		appendN(t, db, run, 3)
	}
	appendType(t, db, "run-a", "run.finished")
	appendType(t, db, "run-b", "run.finished")
	// run-b was resumed after it finished: running again.
	appendType(t, db, "run-b", "run.resumed")
	x := db.SQL()

	refused := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", what, err, want)
		}
	}
	// A plain DELETE, of one row or all, aborts.
	_, err := x.Exec(`DELETE FROM events WHERE run_id = 'run-a'`)
	refused("plain delete", err, "append-only: DELETE refused")
	_, err = x.Exec(`DELETE FROM events`)
	refused("delete all", err, "append-only: DELETE refused")
	// A grant for one run does not let another run's events go.
	tx := x.MustBegin()
	if _, err := tx.Exec(`INSERT INTO prune_grants (run_id) VALUES ('run-a')`); err != nil {
		t.Fatal(err)
	}
	_, err = tx.Exec(`DELETE FROM events WHERE run_id = 'run-c'`)
	refused("delete of a run with no grant", err, "append-only: DELETE refused")
	_ = tx.Rollback()
	// A grant left in place fails the commit, so nothing is deleted.
	tx = x.MustBegin()
	if _, err := tx.Exec(`INSERT INTO prune_grants (run_id) VALUES ('run-a')`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`DELETE FROM events WHERE run_id = 'run-a'`); err != nil {
		t.Fatal(err)
	}
	refused("commit with a grant left", tx.Commit(), "FOREIGN KEY constraint failed")
	if n := count(t, db, "run-a"); n != 5 {
		t.Fatalf("run-a has %d events after the failed commit, want 5", n)
	}
	// A grant is refused for a run that has not finished (never, or resumed).
	for _, run := range []string{"run-b", "run-c", "run-none"} {
		_, err := x.Exec(`INSERT INTO prune_grants (run_id) VALUES (?)`, run)
		refused("grant for "+run, err, "only a finished run can be pruned")
	}
	refused("Prune of a resumed run", db.Prune(ctx, []string{"run-a", "run-b"}, nil), "only a finished run can be pruned")
	if n := count(t, db, "run-a"); n != 5 {
		t.Fatalf("a refused prune removed events of run-a: %d left", n)
	}
	// UPDATE stays refused for everyone.
	_, err = x.Exec(`UPDATE events SET payload = '{}' WHERE run_id = 'run-a'`)
	refused("update", err, "UPDATE refused")

	var seen []string
	if err := db.Prune(ctx, []string{"run-a"}, func(_ context.Context, _ *events.Tx, run string) error {
		seen = append(seen, run)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, db, "run-a"); n != 0 || len(seen) != 1 {
		t.Fatalf("after prune run-a has %d events, callback saw %v", n, seen)
	}
	var grants int
	if err := x.Get(&grants, `SELECT COUNT(*) FROM prune_grants`); err != nil || grants != 0 {
		t.Fatalf("grants left: %d %v", grants, err)
	}
	for _, run := range []string{"run-b", "run-c"} {
		if _, err := db.VerifyRun(ctx, run); err != nil {
			t.Errorf("%s after the prune: %v", run, err)
		}
	}
	// The pruned id may be used again from seq 1 (the tip cache forgot it).
	appendType(t, db, "run-a", "run.created")
	if n := count(t, db, "run-a"); n != 1 {
		t.Fatalf("run-a anew: %d events", n)
	}
	// A plain DELETE is still refused after a prune.
	_, err = x.Exec(`DELETE FROM events WHERE run_id = 'run-c'`)
	refused("plain delete after a prune", err, "append-only: DELETE refused")
}
