package events

import (
	"context"
	"sync"
)

// The release riding a run's last commit (AppendFinal). It is the same
// statement as the unlock's, queued in the commit's transaction after the
// projection (so the runs row already says the run is over and the row is
// deleted); if the commit fails, nothing of it happened and the unlock
// releases as before. A role without DELETE on run_leases would abort the
// whole commit on releaseOrDelete, so whether it may delete is asked once
// (checkDeletePrivilege) and releaseLease is used without it.

// checkDeletePrivilege learns, once per DB, whether this role may delete
// run_leases rows; if the question fails, releases only clear the row.
func (db *DB) checkDeletePrivilege(ctx context.Context) {
	p := db.pg
	p.privOnce.Do(func() {
		var may bool
		err := db.x.QueryRowContext(ctx, `SELECT has_table_privilege('run_leases', 'DELETE')`).Scan(&may)
		if err != nil || !may {
			p.noDelete.Store(true)
		}
	})
}

// knowDeletePrivilege records the answer Open read with the schema version
// (pgOpenState), so that checkDeletePrivilege never asks.
func (db *DB) knowDeletePrivilege(may bool) {
	p := db.pg
	p.privOnce.Do(func() {
		if !may {
			p.noDelete.Store(true)
		}
	})
}

// releaseInTx queues the release of this process's lease on runID in tx,
// the run's last commit; nothing when it holds none (or lost it).
func (db *DB) releaseInTx(ctx context.Context, tx *Tx, runID string) error {
	p := db.pg
	p.mu.Lock()
	l := p.leases[runID]
	if l == nil || l.lost {
		p.mu.Unlock()
		return nil
	}
	l.releasing = true
	epoch := l.epoch
	p.mu.Unlock()
	q, args := releaseOrDelete, []any{runID, p.owner, epoch, runID, p.owner, epoch}
	if p.noDelete.Load() {
		q, args = releaseLease, args[:3]
	}
	return tx.execWrap(ctx, func(err error) error {
		return &Error{Op: "append: release the lease of run " + runID, Path: db.path, Err: classify(err)}
	}, q, args...)
}

// releasedWith settles an AppendFinal: committed, the lease is forgotten
// (its row was released by the commit); failed, it is held as before and
// the unlock releases it.
func (db *DB) releasedWith(runID string, committed bool) {
	p := db.pg
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.leases[runID]
	if l == nil || !l.releasing {
		return
	}
	l.releasing = false
	if committed {
		delete(p.leases, runID)
	}
}

// Releasing a run's lease (lease.go): the row is cleared for the next
// claimer, or deleted once the run is over. The run's unlock does it in a
// statement of its own, unless the run's last commit (AppendFinal,
// run.finished) did it in its transaction: then the release is exactly as
// durable as the run's end, and the unlock finds nothing left to release.

const (
	// releaseLease clears the lease if it is still ours.
	releaseLease = `UPDATE run_leases SET owner = NULL, owner_key = NULL, lease_expires_at = NULL
WHERE run_id = ? AND owner = ? AND lease_epoch = ?`
	// releaseOrDelete is releaseLease that also deletes the row once the
	// run is over (recorded, and no longer queued or running: no worker
	// claims it, and a later resume's claimRun inserts it anew, its owner
	// naming the new process, so no stale writer's (owner, epoch) can
	// match it). One statement either way; a role without DELETE on
	// run_leases (the least-privilege worker of docs/POSTGRES.md) falls
	// back to releaseLease.
	releaseOrDelete = `WITH gone AS (
    DELETE FROM run_leases l WHERE l.run_id = ? AND l.owner = ? AND l.lease_epoch = ?
      AND EXISTS (SELECT 1 FROM runs r WHERE r.run_id = l.run_id AND r.state NOT IN ('queued', 'running'))
    RETURNING 1)
UPDATE run_leases SET owner = NULL, owner_key = NULL, lease_expires_at = NULL
WHERE run_id = ? AND owner = ? AND lease_epoch = ? AND NOT EXISTS (SELECT 1 FROM gone)`
)

// sqlstateNoPrivilege is PostgreSQL's insufficient_privilege.
const sqlstateNoPrivilege = "42501"

// releaseFunc is the unlock of lease l: it forgets l and, unless l was
// lost, clears the row if it is still ours.
func (db *DB) releaseFunc(l *lease) func() {
	var once sync.Once
	return func() { once.Do(func() { db.releaseLease(l) }) }
}

func (db *DB) releaseLease(l *lease) {
	p := db.pg
	p.mu.Lock()
	if p.leases[l.runID] != l {
		p.mu.Unlock()
		return
	}
	delete(p.leases, l.runID)
	skip := l.lost || l.pending // a pending lease has no row yet
	p.mu.Unlock()
	if skip {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.ttl)
	defer cancel()
	// Best effort: a release that fails leaves the lease to expire.
	if !p.noDelete.Load() {
		_, err := db.x.ExecContext(ctx, releaseOrDelete, l.runID, p.owner, l.epoch, l.runID, p.owner, l.epoch)
		if pe := pgError(err); pe == nil || pe.Code != sqlstateNoPrivilege {
			return
		}
		p.noDelete.Store(true)
	}
	_, _ = db.x.ExecContext(ctx, releaseLease, l.runID, p.owner, l.epoch)
}
