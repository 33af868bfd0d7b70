package events_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestPostgres_ChainCheckedByDatabase: whoever writes to events, the
// database refuses every row that does not follow its run's log: a gap,
// a broken prev_hash link, a first seq other than 1, a seq already
// written, inside one multi-row statement as well as across statements;
// a refused statement writes none of its rows (migration 0009's one
// statement trigger, which replaced the per-row chain trigger).
func TestPostgres_ChainCheckedByDatabase(t *testing.T) {
	db := testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{})
	ctx := context.Background()
	const run = "run-chain"
	recs := []events.Record{{Stream: "run", Type: "test.a"}, {Stream: "run", Type: "test.b"}, {Stream: "run", Type: "test.c"}}
	evs, err := db.Append(ctx, run, recs, nil)
	if err != nil || len(evs) != 3 {
		t.Fatalf("append = %d events, %v; want 3", len(evs), err)
	}
	h3 := evs[2].Hash
	row := func(r string, seq int64, prev, hash string) string {
		return "('" + r + "', " + strconv.FormatInt(seq, 10) + ", 'run', 'test.x', '{}', 'now', '" + prev + "', '" + hash + "')"
	}
	insert := func(rows ...string) error {
		_, err := db.SQL().ExecContext(ctx, `INSERT INTO events (run_id, seq, stream, type, payload, created_at, prev_hash, hash) VALUES `+strings.Join(rows, ", "))
		return err
	}
	refused := []struct {
		name string
		rows []string
		code string
	}{
		{"gap", []string{row(run, 5, h3, "h5")}, "AG001"},
		{"broken link", []string{row(run, 4, "bogus", "h4")}, "AG001"},
		{"gap inside one statement", []string{row(run, 4, h3, "h4"), row(run, 6, "h4", "h6")}, "AG001"},
		{"broken link inside one statement", []string{row(run, 4, h3, "h4"), row(run, 5, "h3", "h5")}, "AG001"},
		{"a new run not at seq 1", []string{row("run-new", 2, "", "n2")}, "AG001"},
		{"a good run with a bad one", []string{row("run-new", 1, "", "n1"), row(run, 5, h3, "h5")}, "AG001"},
		{"a seq already written", []string{row(run, 3, evs[1].Hash, "h3bis")}, "23505"},
		{"seq 1 of a run that has events", []string{row(run, 1, "", "h1bis")}, "23505"},
	}
	for _, c := range refused {
		err := insert(c.rows...)
		if err == nil || !strings.Contains(err.Error(), "SQLSTATE "+c.code) {
			t.Fatalf("%s: insert = %v; want SQLSTATE %s", c.name, err, c.code)
		}
	}
	if err := insert(row("run-new", 1, "", "n1"), row(run, 4, h3, "h4"), row("run-new", 2, "n1", "n2"), row(run, 5, "h4", "h5")); err != nil {
		t.Fatalf("two runs' next rows in one statement: %v", err)
	}
	var n, max int64
	if err := db.SQL().QueryRowContext(ctx, `SELECT count(*), max(seq) FROM events WHERE run_id = $1`, run).Scan(&n, &max); err != nil || n != 5 || max != 5 {
		t.Fatalf("run's log = %d rows up to seq %d, %v; want 5 rows up to 5 (nothing of the refused statements)", n, max, err)
	}
	if err := db.SQL().QueryRowContext(ctx, `SELECT count(*) FROM events WHERE run_id = 'run-new'`).Scan(&n); err != nil || n != 2 {
		t.Fatalf("run-new's log = %d rows, %v; want 2", n, err)
	}
}

// TestPostgres_IdentityImmutable: an UPDATE of protocol_calls or
// protocol_sessions may change a row's state but none of its identity
// columns (migration 0010 moved the comparison into the triggers' WHEN
// clause; the refusal is the same).
func TestPostgres_IdentityImmutable(t *testing.T) {
	db := testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{})
	ctx := context.Background()
	exec := func(q string) error { _, err := db.SQL().ExecContext(ctx, q); return err }
	if err := exec(`INSERT INTO protocol_calls (effect_id, run_id, task_id, attempt, server, tool, idempotency, generation, status, arguments_digest, created_at, updated_at)
		VALUES ('e1', 'r1', 't1', 1, 's', 'echo', 'at_most_once', 1, 'prepared', 'd', 'now', 'now')`); err != nil {
		t.Fatal(err)
	}
	if err := exec(`INSERT INTO protocol_sessions (run_id, task_id, remote, generation, url, status, created_at, updated_at)
		VALUES ('r1', 't1', 's', 1, 'http://127.0.0.1/mcp', 'initialized', 'now', 'now')`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE protocol_calls SET status = 'succeeded', result_digest = 'x', updated_at = 'later'`,
		`UPDATE protocol_calls SET idempotency = idempotency, tool = tool`,
		`UPDATE protocol_sessions SET status = 'expired', catalog_digest = 'c'`,
	} {
		if err := exec(q); err != nil {
			t.Fatalf("%s: %v; want it allowed", q, err)
		}
	}
	for _, set := range []string{"effect_id = 'e2'", "run_id = 'r2'", "task_id = 't2'", "attempt = 2", "operation = 'x'",
		"server = 'x'", "tool = 'x'", "idempotency = 'pure'", "arguments_digest = 'x'"} {
		if err := exec(`UPDATE protocol_calls SET status = 'failed', ` + set); err == nil || !strings.Contains(err.Error(), "immutable") || !strings.Contains(err.Error(), "SQLSTATE 23001") {
			t.Fatalf("protocol_calls SET %s: %v; want refused (23001)", set, err)
		}
	}
	for _, set := range []string{"run_id = 'r2'", "task_id = 't2'", "remote = 'x'", "generation = 2", "url = 'x'"} {
		if err := exec(`UPDATE protocol_sessions SET status = 'expired', ` + set); err == nil || !strings.Contains(err.Error(), "immutable") || !strings.Contains(err.Error(), "SQLSTATE 23001") {
			t.Fatalf("protocol_sessions SET %s: %v; want refused (23001)", set, err)
		}
	}
	var status string
	if err := db.SQL().QueryRowContext(ctx, `SELECT status FROM protocol_calls WHERE effect_id = 'e1'`).Scan(&status); err != nil || status != "succeeded" {
		t.Fatalf("status = %q, %v; want succeeded (no refused update applied)", status, err)
	}
}
