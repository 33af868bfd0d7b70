//go:build cgo

package events_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestSQLite_ApplierOnWritersConnection: on SQLite an Applier runs on the
// writer's own connection (litetx.go): it writes with Exec and reads its
// own uncommitted writes with QueryRow into the destinations the
// projector uses; no row is sql.ErrNoRows; multi-row reads are refused;
// an Applier's error rolls back its events and rows and leaves the
// connection usable; the data survives Close and a reopen.
func TestSQLite_ApplierOnWritersConnection(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lite.db")
	db := testkit.OpenDB(t, path, events.Options{Durability: events.DurabilityNormal})
	ctx := context.Background()
	rec := []events.Record{{Stream: "run", Type: "test.step", Payload: map[string]string{"v": "x"}}}
	var got struct {
		workflow string
		calls    int64
		seq      int
		errText  sql.NullString
		digest   []byte
		noRow    error
		multi    error
	}
	apply := func(ctx context.Context, tx *events.Tx, evs []events.Event) error {
		if _, err := tx.Exec(ctx, `INSERT INTO runs (run_id, workflow, workflow_digest, mode, state, exit_code, started_at, updated_at) VALUES (?, 'wf', 'dg', 'run', 'running', ?, ?, ?)`, evs[0].RunID, 7, evs[0].CreatedAt, evs[0].CreatedAt); err != nil {
			return err
		}
		row, err := tx.QueryRow(ctx, `SELECT workflow, exit_code, ?, error, workflow_digest FROM runs WHERE run_id = ?`, evs[0].Seq, evs[0].RunID)
		if err != nil {
			return err
		}
		if err := row.Scan(&got.workflow, &got.calls, &got.seq, &got.errText, &got.digest); err != nil {
			return err
		}
		row, err = tx.QueryRow(ctx, `SELECT workflow FROM runs WHERE run_id = 'absent'`)
		if err != nil {
			return err
		}
		var w string
		got.noRow = row.Scan(&w)
		var n int
		got.multi = tx.GetContext(ctx, &n, `SELECT COUNT(*) FROM runs`)
		return nil
	}
	if _, err := db.Append(ctx, "run-a", rec, apply); err != nil {
		t.Fatal(err)
	}
	if got.workflow != "wf" || got.calls != 7 || got.seq != 1 || got.errText.Valid || string(got.digest) != "dg" {
		t.Errorf("read back %+v; want wf, 7, seq 1, NULL error, digest dg", got)
	}
	if !errors.Is(got.noRow, sql.ErrNoRows) {
		t.Errorf("no row: %v, want sql.ErrNoRows", got.noRow)
	}
	if got.multi == nil || !strings.Contains(got.multi.Error(), "QueryRow only") {
		t.Errorf("GetContext in an append: %v, want a refusal", got.multi)
	}

	boom := errors.New("boom")
	failing := func(ctx context.Context, tx *events.Tx, evs []events.Event) error {
		if _, err := tx.Exec(ctx, `UPDATE runs SET exit_code = 99 WHERE run_id = ?`, "run-a"); err != nil {
			return err
		}
		return boom
	}
	if _, err := db.Append(ctx, "run-a", rec, failing); !errors.Is(err, boom) {
		t.Fatalf("failing applier: %v, want boom", err)
	}
	// The connection is out of the failed transaction: the next append
	// commits, chained right after seq 1.
	evs, err := db.Append(ctx, "run-a", rec, nil)
	if err != nil || len(evs) != 1 || evs[0].Seq != 2 {
		t.Fatalf("append after a failed one = %v, %v; want seq 2", evs, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := testkit.OpenDB(t, path, events.Options{})
	var calls int64
	if err := db2.SQL().QueryRowContext(ctx, `SELECT exit_code FROM runs WHERE run_id = 'run-a'`).Scan(&calls); err != nil || calls != 7 {
		t.Errorf("after reopen calls = %d, %v; want 7 (the failed append's 99 rolled back)", calls, err)
	}
	if n, err := db2.VerifyRun(ctx, "run-a"); err != nil || n != 2 {
		t.Errorf("VerifyRun = %d, %v; want 2 events", n, err)
	}
}
