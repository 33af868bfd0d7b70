package events_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/migrations"
)

func mustOpen(tb testing.TB, path string) *events.DB {
	tb.Helper()
	db, err := events.Open(context.Background(), path, events.Options{})
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

func appendN(tb testing.TB, db *events.DB, run string, n int) {
	tb.Helper()
	for i := 0; i < n; i++ {
		_, err := db.Append(context.Background(), run, []events.Record{{Stream: "run", Type: "test.step", Payload: map[string]int{"i": i}}}, nil)
		if err != nil {
			tb.Fatalf("append: %v", err)
		}
	}
}

func TestOpen_FreshDatabaseIsAtLatest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	db := mustOpen(t, path)
	v, err := migrations.Version(context.Background(), db.SQL().DB)
	if err != nil {
		t.Fatal(err)
	}
	if v != 21 || migrations.Latest != 21 {
		t.Fatalf("version = %d (Latest %d), want 21", v, migrations.Latest)
	}
	for _, table := range []string{"events", "protocol_sessions", "protocol_calls", "runs", "tasks"} {
		var n int
		if err := db.SQL().Get(&n, `SELECT COUNT(*) FROM sqlite_master WHERE type='table' AND name=?`, table); err != nil || n != 1 {
			t.Errorf("table %s missing (n=%d, err=%v)", table, n, err)
		}
	}
	var mode string
	if err := db.SQL().Get(&mode, "PRAGMA journal_mode"); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
}

func TestOpen_RefusesNewerSchemaUntouched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "new.db")
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	newer := migrations.Latest + 1
	if _, err := raw.Exec(fmt.Sprintf("CREATE TABLE x(a); PRAGMA user_version = %d", newer)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	before, _ := os.ReadFile(path)
	_, err = events.Open(context.Background(), path, events.Options{})
	if !errors.Is(err, migrations.ErrNewerSchema) {
		t.Fatalf("err = %v, want ErrNewerSchema", err)
	}
	var se *events.Error
	if !errors.As(err, &se) {
		t.Fatalf("err %T is not *events.Error", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(newer)) || !strings.Contains(err.Error(), fmt.Sprint(migrations.Latest)) {
		t.Errorf("error should name both versions: %v", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("database file changed")
	}
	if _, err := os.Stat(path + "-wal"); err == nil {
		t.Fatal("a WAL file was created")
	}
}

func TestOpen_CorruptFileIsStorageError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.db")
	if err := os.WriteFile(path, bytes.Repeat([]byte("not a database "), 500), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := events.Open(context.Background(), path, events.Options{})
	var se *events.Error
	if !errors.As(err, &se) {
		t.Fatalf("err = %v (%T), want *events.Error", err, err)
	}
}

func TestEvents_AppendOnly(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		db := b.Open(t, events.Options{})
		appendN(t, db, "run-1", 3)
		stmts := []string{
			`UPDATE events SET payload = '{}' WHERE run_id = 'run-1' AND seq = 2`,
			`DELETE FROM events WHERE run_id = 'run-1'`,
		}
		if b.Name == "postgres" {
			stmts = append(stmts, `TRUNCATE events`)
		}
		for _, stmt := range stmts {
			_, err := db.SQL().Exec(stmt)
			if err == nil || !strings.Contains(err.Error(), "append-only") {
				t.Errorf("%s: err = %v, want append-only refusal", stmt, err)
			}
		}
		// A gap in seq is refused by the database too.
		_, err := db.SQL().Exec(`INSERT INTO events VALUES ('run-1', 9, 'run', 'x', '{}', 'now', '', '')`)
		if err == nil || !strings.Contains(err.Error(), "dense") {
			t.Errorf("gap insert: err = %v, want dense refusal", err)
		}
		if n, err := db.VerifyRun(context.Background(), "run-1"); err != nil || n != 3 {
			t.Fatalf("VerifyRun = %d, %v; want the 3 events untouched", n, err)
		}
	})
}

func TestEvents_DenseSeqAndChain(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testDenseSeqAndChain(t, b.Open(t, events.Options{})) })
}

func testDenseSeqAndChain(t *testing.T, db *events.DB) {
	appendN(t, db, "run-a", 5)
	appendN(t, db, "run-b", 2)
	_, err := db.Append(context.Background(), "run-a", []events.Record{
		{Stream: "run", Type: "batch.one"}, {Stream: "run", Type: "batch.two"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(context.Background(), "run-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 7 {
		t.Fatalf("len = %d, want 7", len(evs))
	}
	for i, e := range evs {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq[%d] = %d", i, e.Seq)
		}
	}
	if err := events.Verify(evs); err != nil {
		t.Fatalf("verify: %v", err)
	}
	n, err := db.VerifyRun(context.Background(), "run-b")
	if err != nil || n != 2 {
		t.Fatalf("VerifyRun = %d, %v", n, err)
	}
}

func TestEvents_FailedApplyLeavesNothing(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testFailedApplyLeavesNothing(t, b.Open(t, events.Options{})) })
}

func testFailedApplyLeavesNothing(t *testing.T, db *events.DB) {
	appendN(t, db, "run-1", 1)
	boom := errors.New("boom")
	_, err := db.Append(context.Background(), "run-1", []events.Record{{Stream: "run", Type: "x"}}, func(context.Context, *events.Tx, []events.Event) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	appendN(t, db, "run-1", 1)
	n, err := db.VerifyRun(context.Background(), "run-1")
	if err != nil || n != 2 {
		t.Fatalf("VerifyRun = %d, %v; want 2 events", n, err)
	}
}

func TestEvents_TamperBreaksChainAtSeq(t *testing.T) {
	t.Run("sqlite", testTamperSQLite)
	t.Run("postgres", func(t *testing.T) {
		db := testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{})
		appendN(t, db, "run-1", 6)
		// Tamper as the table's owner would, past the trigger (a
		// least-privilege role cannot: docs/POSTGRES.md).
		for _, stmt := range []string{
			`ALTER TABLE events DISABLE TRIGGER events_no_update`,
			`UPDATE events SET payload = '{"i":9}' WHERE run_id='run-1' AND seq=4`,
		} {
			if _, err := db.SQL().Exec(stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
		}
		_, err := db.VerifyRun(context.Background(), "run-1")
		var ce *events.ChainError
		if !errors.As(err, &ce) || ce.Seq != 4 {
			t.Fatalf("err = %v, want chain error at seq 4", err)
		}
	})
}

func testTamperSQLite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	db := mustOpen(t, path)
	appendN(t, db, "run-1", 6)
	db.Close()

	// Tamper with a copy whose triggers were dropped (the real file refuses).
	cp := filepath.Join(dir, "copy.db")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("sqlite3", cp)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`DROP TRIGGER events_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE events SET payload = '{"i":9}' WHERE run_id='run-1' AND seq=4`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	tampered := mustOpen(t, cp)
	_, err = tampered.VerifyRun(context.Background(), "run-1")
	var ce *events.ChainError
	if !errors.As(err, &ce) || ce.Seq != 4 {
		t.Fatalf("err = %v, want chain error at seq 4", err)
	}
}

func TestEvents_AppendAfterRefusesAMovedLog(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		dsn := b.DSN(t)
		testAppendAfterRefusesAMovedLog(t, testkit.OpenDB(t, dsn, events.Options{}), testkit.OpenDB(t, dsn, events.Options{}))
	})
}

// testAppendAfterRefusesAMovedLog: other is a second process's view of the
// same database.
func testAppendAfterRefusesAMovedLog(t *testing.T, db, other *events.DB) {
	appendN(t, db, "run-1", 2)
	if _, err := other.AppendAfter(context.Background(), "run-1", 2, []events.Record{{Stream: "run", Type: "run.resumed"}}, nil); err != nil {
		t.Fatalf("append after the real tip: %v", err)
	}
	_, err := db.AppendAfter(context.Background(), "run-1", 2, []events.Record{{Stream: "run", Type: "run.resumed"}}, nil)
	if !errors.Is(err, events.ErrConflict) {
		t.Fatalf("err = %v, want ErrConflict", err)
	}
	if n, err := db.VerifyRun(context.Background(), "run-1"); err != nil || n != 3 {
		t.Fatalf("VerifyRun = %d, %v; want 3 events", n, err)
	}
}

// TestChain_SameOnBothBackends: the same records appended at the same
// instants give the same chain, byte for byte, on SQLite and PostgreSQL,
// and the two audit exports are identical files that verify.
func TestChain_SameOnBothBackends(t *testing.T) {
	ctx := context.Background()
	var exports [2]bytes.Buffer
	var heads [2]string
	for i, db := range []*events.DB{
		testkit.OpenDB(t, "", events.Options{}),
		testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{}),
	} {
		clock := time.Date(2026, 12, 3, 14, 0, 0, 123456789, time.UTC)
		db.Now = func() time.Time { clock = clock.Add(1500 * time.Microsecond); return clock }
		if _, err := db.Append(ctx, "run-x", []events.Record{{Stream: "run", Type: "run.created", Payload: map[string]any{"digest": "sha256:abc", "z": 1, "a": "é\u2028<>&"}}}, nil); err != nil {
			t.Fatal(err)
		}
		for j := range 5 {
			if _, err := db.Append(ctx, "run-x", []events.Record{
				{Stream: "task/t/1", Type: "test.step", Payload: json.RawMessage(fmt.Sprintf(`{"b":%d,"a":[1,2,{"y":null,"x":"\u00e9"}]}`, j))},
				{Stream: "call/e", Type: "test.other", Payload: map[string]string{"k": strings.Repeat("x", j*100)}},
			}, nil); err != nil {
				t.Fatal(err)
			}
		}
		h, err := db.Export(ctx, &exports[i], "run-x")
		if err != nil {
			t.Fatal(err)
		}
		heads[i] = h.FinalHash
		if n, _, err := events.VerifyStream(bytes.NewReader(exports[i].Bytes())); err != nil || n != 11 {
			t.Fatalf("%s: verify = %d, %v", db.Backend(), n, err)
		}
	}
	if heads[0] != heads[1] || !bytes.Equal(exports[0].Bytes(), exports[1].Bytes()) {
		t.Fatalf("exports differ: head %s (sqlite) vs %s (postgres)\n%s\n---\n%s", heads[0], heads[1], exports[0].String(), exports[1].String())
	}
}

// TestEvents_StaleTailIsAConflict: a writer whose cached tail is stale
// (another process appended meanwhile) is refused by the database (primary
// key or chain check) with ErrConflict, nothing of its batch is written,
// and its next append reloads the tail.
func TestEvents_StaleTailIsAConflict(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		dsn := b.DSN(t)
		db, other := testkit.OpenDB(t, dsn, events.Options{}), testkit.OpenDB(t, dsn, events.Options{})
		ctx := context.Background()
		appendN(t, db, "run-1", 2) // db caches the tail at seq 2
		appendN(t, other, "run-1", 1)
		_, err := db.Append(ctx, "run-1", []events.Record{{Stream: "run", Type: "a"}, {Stream: "run", Type: "b"}}, nil)
		if !errors.Is(err, events.ErrConflict) || !strings.Contains(err.Error(), "reload the tail") {
			t.Fatalf("err = %v, want ErrConflict (reload the tail)", err)
		}
		evs, err := db.Append(ctx, "run-1", []events.Record{{Stream: "run", Type: "c"}}, nil)
		if err != nil || len(evs) != 1 || evs[0].Seq != 4 {
			t.Fatalf("append after the conflict = %v, %v; want seq 4", evs, err)
		}
		if n, err := db.VerifyRun(ctx, "run-1"); err != nil || n != 4 {
			t.Fatalf("VerifyRun = %d, %v; want 4 events", n, err)
		}
	})
}

// TestEvents_ConcurrentAppendersShareCommits: 32 goroutines append 25
// events each to 4 runs at once; every run's chain is dense and verifies,
// each goroutine's events appear in its own order, and the appends were
// counted exactly once whatever the batching.
func TestEvents_ConcurrentAppendersShareCommits(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		testConcurrentAppendersShareCommits(t, b.Open(t, events.Options{}))
	})
}

func testConcurrentAppendersShareCommits(t *testing.T, db *events.DB) {
	const goroutines, runs, each = 32, 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run := fmt.Sprintf("run-%d", g%runs)
			for i := 0; i < each; i++ {
				evs, err := db.Append(context.Background(), run, []events.Record{{Stream: fmt.Sprintf("g/%d", g), Type: "test.step", Payload: map[string]int{"g": g, "i": i}}}, nil)
				if err != nil {
					errs <- err
					return
				}
				if len(evs) != 1 || evs[0].RunID != run {
					errs <- fmt.Errorf("append returned %v", evs)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for r := 0; r < runs; r++ {
		run := fmt.Sprintf("run-%d", r)
		evs, err := db.Events(context.Background(), run)
		if err != nil {
			t.Fatal(err)
		}
		if err := events.Verify(evs); err != nil {
			t.Fatal(err)
		}
		if len(evs) != goroutines/runs*each {
			t.Fatalf("%s: %d events, want %d", run, len(evs), goroutines/runs*each)
		}
		next := map[int]int{}
		for _, e := range evs {
			var p struct{ G, I int }
			if err := e.Decode(&p); err != nil {
				t.Fatal(err)
			}
			if p.I != next[p.G] {
				t.Fatalf("%s seq %d: goroutine %d's event %d, want %d", run, e.Seq, p.G, p.I, next[p.G])
			}
			next[p.G]++
		}
	}
	st := db.CommitStats()
	if st.Appends != goroutines*each || st.Commits > st.Appends || st.Commits < 1 {
		t.Fatalf("CommitStats = %+v, want %d appends in at most as many commits", st, goroutines*each)
	}
	t.Logf("%d appends in %d commits", st.Appends, st.Commits)
}
