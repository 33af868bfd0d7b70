package projector

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/events"
)

// projectionRows selects one run's rows of each projection table in a
// stable order.
var projectionRows = []struct{ table, query string }{
	{"runs", `SELECT * FROM runs WHERE run_id = ?`},
	{"tasks", `SELECT * FROM tasks WHERE run_id = ? ORDER BY task_id, attempt`},
	{"protocol_sessions", `SELECT * FROM protocol_sessions WHERE run_id = ? ORDER BY task_id, remote, generation`},
	{"protocol_calls", `SELECT * FROM protocol_calls WHERE run_id = ? ORDER BY effect_id`},
	{"effects", `SELECT * FROM effects WHERE run_id = ? ORDER BY effect_id`},
}

// Mismatch is a projection table whose stored rows of a run differ from
// the rows the log folds to.
type Mismatch struct {
	Table string `json:"table"`
	// Detail names the first differing row and its columns.
	Detail string `json:"detail"`
}

func (m Mismatch) String() string { return m.Table + ": " + m.Detail }

// VerifyProjection recomputes runID's projection rows from the log, in a
// write transaction that is rolled back (nothing changes), and compares
// them with the stored rows that inspect and `runs list` print. The
// projector needs UPDATE and DELETE on these tables, so no trigger can
// guard them as the log is guarded: this is how an edited projection row
// (runs.state, runs.error, a call's status) is detected. It returns the
// tables that differ, none when the projection is what the log says.
func VerifyProjection(ctx context.Context, db *events.DB, runID string) ([]Mismatch, error) {
	tx, err := db.BeginTx(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = tx.Rollback() }()
	stored, err := snapshotRows(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	if err := refold(ctx, db, tx, runID); err != nil {
		return nil, err
	}
	folded, err := snapshotRows(ctx, tx, runID)
	if err != nil {
		return nil, err
	}
	var out []Mismatch
	for _, p := range projectionRows {
		if d := diffRows(stored[p.table], folded[p.table]); d != "" {
			out = append(out, Mismatch{Table: p.table, Detail: d})
		}
	}
	return out, nil
}

type row map[string]any

func snapshotRows(ctx context.Context, tx *events.Tx, runID string) (map[string][]row, error) {
	out := map[string][]row{}
	for _, p := range projectionRows {
		rows, err := tx.QueryxContext(ctx, p.query, runID)
		if err != nil {
			return nil, &events.Error{Op: "verify projection: read " + p.table, Err: err}
		}
		for rows.Next() {
			m := row{}
			if err := rows.MapScan(m); err != nil {
				rows.Close()
				return nil, &events.Error{Op: "verify projection: read " + p.table, Err: err}
			}
			delete(m, "rowid") // the listing order: an identity, or (tasks) an old row's number after migration
			for k, v := range m {
				if bs, ok := v.([]byte); ok {
					m[k] = string(bs)
				}
			}
			out[p.table] = append(out[p.table], m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, &events.Error{Op: "verify projection: read " + p.table, Err: err}
		}
	}
	return out, nil
}

// diffRows describes the first difference between stored and folded rows
// ("" when equal): a row count, or a row's differing columns.
func diffRows(stored, folded []row) string {
	if len(stored) != len(folded) {
		return fmt.Sprintf("%d stored rows, the log gives %d", len(stored), len(folded))
	}
	for i := range stored {
		var cols []string
		for k, v := range folded[i] {
			if !sameValue(stored[i][k], v) {
				cols = append(cols, k)
			}
		}
		if len(cols) > 0 {
			sort.Strings(cols)
			return fmt.Sprintf("row %d: column %s differs from the log", i+1, strings.Join(cols, ", "))
		}
	}
	return ""
}

func sameValue(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}
