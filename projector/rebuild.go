package projector

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/events"
)

// projectionTables are every table Apply writes, in delete order.
var projectionTables = []string{"effects", "protocol_calls", "protocol_sessions", "tasks", "runs"}

// Rebuild recomputes every projection row of runID from the log alone, in
// one transaction.
func Rebuild(ctx context.Context, db *events.DB, runID string) error {
	tx, err := db.BeginTx(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := refold(ctx, db, tx, runID); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return &events.Error{Op: "rebuild: commit", Path: db.Path(), Err: err}
	}
	return nil
}

// refold clears runID's projection rows and folds them again from the log,
// inside tx.
func refold(ctx context.Context, db *events.DB, tx *events.Tx, runID string) error {
	for _, t := range projectionTables {
		if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE run_id = ?`, runID); err != nil {
			return fmt.Errorf("rebuild %s: clear %s: %w", runID, t, err)
		}
	}
	const batch = 512
	var buf []events.Event
	flush := func() error {
		if len(buf) == 0 {
			return nil
		}
		err := Apply(ctx, tx, buf)
		buf = buf[:0]
		return err
	}
	rows, err := tx.QueryxContext(ctx, `SELECT run_id, seq, stream, type, payload, created_at, prev_hash, hash FROM events WHERE run_id = ? ORDER BY seq`, runID)
	if err != nil {
		return fmt.Errorf("rebuild %s: read: %w", runID, err)
	}
	var all []events.Event
	for rows.Next() {
		var e events.Event
		if err := rows.StructScan(&e); err != nil {
			rows.Close()
			return fmt.Errorf("rebuild %s: read: %w", runID, err)
		}
		all = append(all, db.Bind(e))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("rebuild %s: read: %w", runID, err)
	}
	if len(all) == 0 {
		return fmt.Errorf("rebuild: %w: %s", events.ErrNoRun, runID)
	}
	// Fold batch by batch as the run appended them: events sharing a
	// created_at were one transaction, and Apply stamps counters per batch.
	for i, e := range all {
		buf = append(buf, e)
		if i+1 == len(all) || all[i+1].CreatedAt != e.CreatedAt || len(buf) >= batch {
			if err := flush(); err != nil {
				return fmt.Errorf("rebuild %s: %w", runID, err)
			}
		}
	}
	return nil
}

// RunIDs lists every run in the log, oldest first.
func RunIDs(ctx context.Context, db *events.DB) ([]string, error) {
	var ids []string
	err := db.SQL().SelectContext(ctx, &ids, `SELECT run_id FROM events WHERE seq = 1 ORDER BY created_at, run_id`)
	if err != nil {
		return nil, &events.Error{Op: "list runs", Path: db.Path(), Err: err}
	}
	return ids, nil
}
