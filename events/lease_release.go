package events

import (
	"context"
	"sync"
)

// Releasing a run's lease (lease.go): the row is cleared for the next
// claimer, or deleted once the run is over.

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
	lost := l.lost
	p.mu.Unlock()
	if lost {
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
