package events

import "time"

// Hooks for the external tests (package events_test) that need to order
// concurrent appends.

// SetQueuedHook calls fn under the queue's lock as each append joins it:
// lead says whether it leads a commit at once.
func SetQueuedHook(db *DB, fn func(lead bool)) { db.group.queued = fn }

// HoldWriter blocks every commit until release is called.
func HoldWriter(db *DB) (release func()) {
	db.wmu.Lock()
	return db.wmu.Unlock
}

// AgeClaim moves the local deadline of this process's lease on runID into
// the past, as the clock of a process paused past its lease's TTL sees it.
func AgeClaim(db *DB, runID string) {
	db.pg.mu.Lock()
	defer db.pg.mu.Unlock()
	if l := db.pg.leases[runID]; l != nil {
		l.deadline = time.Now().Add(-time.Second)
	}
}
