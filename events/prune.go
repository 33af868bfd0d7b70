package events

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/migrations"
)

// ErrPruneUnsupported: the narrow deletion path (grants checked by the
// DELETE trigger) exists only in the SQLite schema so far.
var ErrPruneUnsupported = errors.New("runs prune is not supported on PostgreSQL yet: the log there stays append-only")

// PruneFunc deletes, inside the prune transaction, what else belongs to a
// pruned run (its projection rows).
type PruneFunc func(ctx context.Context, tx *Tx, runID string) error

// Prune deletes every event of each run in runIDs, and what also deletes
// for it, in one transaction: the only path by which events leave the log
// (migration 0015). For each run it takes the run lock, inserts a grant
// (refused by the schema unless the run's last run.* event is
// run.finished), deletes the run's events, and removes the grant before
// the commit; a grant left in place would fail the commit. Either every
// run goes or none does.
func (db *DB) Prune(ctx context.Context, runIDs []string, also PruneFunc) error {
	if db.Backend() == migrations.Postgres {
		return &Error{Op: "prune", Err: ErrPruneUnsupported}
	}
	for _, id := range runIDs {
		unlock, err := db.LockRun(id)
		if err != nil {
			return fmt.Errorf("prune %s: %w", id, err)
		}
		defer unlock()
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	tx, err := db.BeginTx(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	for _, id := range runIDs {
		if _, err := tx.ExecContext(ctx, `INSERT INTO prune_grants (run_id) VALUES (?)`, id); err != nil {
			return fmt.Errorf("prune %s: grant: %w", id, classify(err))
		}
		res, err := tx.ExecContext(ctx, `DELETE FROM events WHERE run_id = ?`, id)
		if err != nil {
			return fmt.Errorf("prune %s: delete events: %w", id, classify(err))
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("prune: %w: %s", ErrNoRun, id)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM settings WHERE name = ?`, telemetryMarkPrefix+id); err != nil {
			return fmt.Errorf("prune %s: delete telemetry mark: %w", id, classify(err))
		}
		if also != nil {
			if err := also(ctx, tx, id); err != nil {
				return fmt.Errorf("prune %s: %w", id, err)
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM prune_grants WHERE run_id = ?`, id); err != nil {
			return fmt.Errorf("prune %s: remove grant: %w", id, classify(err))
		}
	}
	if err := tx.Commit(); err != nil {
		return &Error{Op: "prune: commit", Path: db.path, Err: classify(err)}
	}
	for _, id := range runIDs {
		delete(db.tips, id)
	}
	return nil
}
