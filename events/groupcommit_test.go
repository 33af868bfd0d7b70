package events_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestGroupCommit_MembersFailAlone holds the writer while one appender
// leads and seven queue behind it in a known order, then lets it go: the
// seven commit as one batch in which three members fail (a compare-and-
// append conflict, a projection error, a payload refused) and roll back
// alone, and the others commit with dense, verifying chains. On both
// backends: on PostgreSQL a member's statements travel as one pipelined
// batch, and a statement the server refuses (d1) fails its member alone.
func TestGroupCommit_MembersFailAlone(t *testing.T) {
	testkit.EachBackend(t, testGroupCommitMembersFailAlone)
}

func testGroupCommitMembersFailAlone(t *testing.T, b testkit.Backend) {
	db := b.Open(t, events.Options{})
	joined := make(chan bool, 16)
	events.SetQueuedHook(db, func(lead bool) { joined <- lead })

	rec := func(v string) []events.Record {
		return []events.Record{{Stream: "run", Type: "test.step", Payload: map[string]string{"v": v}}}
	}
	projectRun := func(ctx context.Context, tx *events.Tx, evs []events.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO runs (run_id, workflow, workflow_digest, mode, state, started_at, updated_at) VALUES (?, 'w', 'd', 'run', 'running', ?, ?)`, evs[0].RunID, evs[0].CreatedAt, evs[0].CreatedAt)
		return err
	}
	boom := errors.New("boom")
	refused := func(ctx context.Context, tx *events.Tx, evs []events.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO no_such_table (x) VALUES (1)`)
		return err
	}
	projectThenFail := func(ctx context.Context, tx *events.Tx, evs []events.Event) error {
		if err := projectRun(ctx, tx, evs); err != nil {
			return err
		}
		return boom
	}
	type step struct {
		name  string
		run   string
		after int64
		recs  []events.Record
		apply events.Applier
	}
	steps := []step{
		{"a1 (leads)", "run-a", -1, rec("a1"), nil},
		{"a2", "run-a", -1, rec("a2"), nil},
		{"a conflict", "run-a", 1, rec("stale"), nil}, // a2 moved run-a to seq 2 in this batch
		{"b1 projection fails", "run-b", -1, rec("b1"), projectThenFail},
		{"a3", "run-a", 2, rec("a3"), nil},
		{"b2", "run-b", -1, rec("b2"), projectRun},
		{"c1 not UTF-8", "run-c", -1, []events.Record{{Stream: "run", Type: "test.step", Payload: []byte("\"\xff\"")}}, nil},
		{"d1 statement refused", "run-d", -1, rec("d1"), refused},
		// c2's two events are the first two-row INSERT on the connection:
		// on PostgreSQL its statement is prepared right after d1 aborted
		// the transaction (the savepoint must be rolled back first).
		{"c2", "run-c", -1, append(rec("c2"), rec("c2b")...), nil},
	}
	errs := make([]error, len(steps))
	seqs := make([][]events.Event, len(steps))
	var wg sync.WaitGroup
	release := events.HoldWriter(db) // the leader blocks here, with its batch of one
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs[i], errs[i] = db.AppendAfter(context.Background(), s.run, s.after, s.recs, s.apply)
		}()
		if lead := <-joined; lead != (i == 0) {
			t.Fatalf("%s: lead = %v", s.name, lead)
		}
	}
	release()
	wg.Wait()

	want := map[string]int64{"a1 (leads)": 1, "a2": 2, "a3": 3, "b2": 1, "c2": 1}
	for i, s := range steps {
		w, ok := want[s.name]
		switch {
		case ok && (errs[i] != nil || len(seqs[i]) == 0 || seqs[i][0].Seq != w):
			t.Errorf("%s: events %v, err %v; want seq %d", s.name, seqs[i], errs[i], w)
		case !ok && errs[i] == nil:
			t.Errorf("%s: committed, want an error", s.name)
		}
	}
	if !errors.Is(errs[2], events.ErrConflict) {
		t.Errorf("a conflict: err = %v, want events.ErrConflict", errs[2])
	}
	if !errors.Is(errs[3], boom) {
		t.Errorf("b1: err = %v, want boom", errs[3])
	}
	if st := db.CommitStats(); st.Commits != 2 || st.Appends != 5 {
		t.Errorf("CommitStats = %+v, want 2 commits of 5 appends", st)
	}
	if ok, err := db.RunExists(context.Background(), "run-d"); err != nil || ok {
		t.Errorf("run-d exists = %v, %v; want nothing of d1 committed", ok, err)
	}
	for run, n := range map[string]int64{"run-a": 3, "run-b": 1, "run-c": 2} {
		if got, err := db.VerifyRun(context.Background(), run); err != nil || got != n {
			t.Errorf("VerifyRun(%s) = %d, %v; want %d", run, got, err, n)
		}
	}
	var runs int
	if err := db.SQL().Get(&runs, `SELECT COUNT(*) FROM runs`); err != nil || runs != 1 {
		t.Errorf("runs rows = %d, %v; want 1 (b2's; b1's projection rolled back)", runs, err)
	}
	// The tips cached after the batch are right: the next appends chain on.
	for _, run := range []string{"run-a", "run-b", "run-c", "run-d"} {
		if _, err := db.Append(context.Background(), run, rec("next"), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := db.VerifyRun(context.Background(), run); err != nil {
			t.Fatal(err)
		}
	}
}
