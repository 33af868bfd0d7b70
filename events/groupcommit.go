package events

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Group commit (the etcd/raft WAL pattern; LevelDB's write group): every
// Append joins a queue. An appender that finds no commit running leads: it
// takes what is queued (itself, at least) and commits it as one
// transaction at once, so a lone appender never waits for company. Appends
// that arrive while that commit runs wait in the queue; when it is done the
// leader hands the lead to the first of them, which commits all of them
// together, and then wakes its own batch. At synchronous=FULL, n appenders
// that arrive during one fsync share the next one.
//
// Inside a batch each member is one SAVEPOINT: a member that fails (a
// compare-and-append conflict, a projection error, a payload refused) is
// rolled back alone and gets its own error; the others commit. A member
// learns its outcome only after the COMMIT: no appender acts on events that
// are not durable. Per-run order is queue order; each member's events are
// contiguous and chained to the previous member's of the same run.

// maxBatchMembers bounds one transaction; what is left waits for the next.
const maxBatchMembers = 256

// member is one Append waiting for, or in, a batch.
type member struct {
	ctx   context.Context
	runID string
	after int64
	recs  []Record
	apply Applier
	// release: the member is the run's last commit by this process and
	// releases its lease in the transaction (AppendFinal).
	release bool
	// newLease: the member's transaction inserted the run's lease row
	// (a new run's first commit, LockNewRun).
	newLease bool
	evs      []Event
	err      error
	// built are the events the member's last attempt inserted (set even
	// when it failed): after a connection lost at the COMMIT, the log says
	// whether they are in (append.go).
	built []Event
	// wake carries one message to a member that queued behind a running
	// commit: true when evs/err are set, false when it must lead the next
	// batch. nil for a member that leads at once.
	wake chan bool
}

// writeGroup is the queue of appends waiting for a commit.
type writeGroup struct {
	mu      sync.Mutex
	queue   []*member
	leading bool // a leader is committing; while false, queue is empty
	commits atomic.Int64
	appends atomic.Int64
	// queued, when set (tests), is called under mu as each member joins:
	// lead says whether it leads at once.
	queued func(lead bool)
	// observer sees each commit (observe.go); observed is its reused
	// buffer. Both are guarded by DB.wmu.
	observer CommitObserver
	observed [][]Event
}

// CommitStats counts the append path's work since Open.
type CommitStats struct {
	// Commits is the number of append transactions committed.
	Commits int64
	// Appends is the number of Append/AppendAfter calls they committed.
	Appends int64
}

// CommitStats reports how many appends were committed in how many
// commits: with concurrent appenders, Commits < Appends is group commit at
// work.
func (db *DB) CommitStats() CommitStats {
	return CommitStats{Commits: db.group.commits.Load(), Appends: db.group.appends.Load()}
}

// submit queues m and returns when m's batch has committed or failed.
func (g *writeGroup) submit(db *DB, m *member) {
	g.mu.Lock()
	if g.leading {
		m.wake = make(chan bool, 1)
		g.queue = append(g.queue, m)
		if g.queued != nil {
			g.queued(false)
		}
		g.mu.Unlock()
		if done := <-m.wake; done {
			return
		}
		g.mu.Lock() // we lead: m is queue[0]
	} else {
		g.queue = append(g.queue, m)
		g.leading = true
		if g.queued != nil {
			g.queued(true)
		}
	}
	batch := g.queue
	if len(batch) > maxBatchMembers {
		batch, g.queue = batch[:maxBatchMembers], batch[maxBatchMembers:]
	} else {
		g.queue = nil
	}
	g.mu.Unlock()

	db.commitBatch(batch)

	g.mu.Lock()
	if len(g.queue) > 0 {
		g.queue[0].wake <- false // the next batch starts before this one's members wake
	} else {
		g.leading = false
	}
	g.mu.Unlock()
	for _, o := range batch {
		if o != m {
			o.wake <- true
		}
	}
}

// commitBatch writes batch in one transaction and sets every member's
// outcome.
func (db *DB) commitBatch(batch []*member) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	live := make([]*member, 0, len(batch))
	for _, m := range batch {
		if err := m.ctx.Err(); err != nil {
			m.err = &Error{Op: "begin", Path: db.path, Err: err}
			continue
		}
		live = append(live, m)
	}
	if len(live) == 0 {
		return
	}
	fail := func(err error) {
		for _, m := range live {
			if m.err == nil {
				m.evs, m.err = nil, err
			}
			delete(db.tips, m.runID) // re-read the tip next time
		}
	}
	ctx := context.Background() // one member's cancellation must not abort the others'
	var started time.Time
	if db.group.observer != nil {
		started = time.Now()
	}
	if db.pg != nil {
		// One raw connection, the writes pipelined (pgpipe.go). A member
		// the server refused aborted the transaction: it is rolled back
		// whole and run again without that member.
		for pending := live; len(pending) > 0; {
			ran := false
			err := db.withPipe(ctx, func(tx *Tx) {
				ran = true
				pending = db.commitMembers(tx, pending, fail, started)
			})
			if !ran && err != nil {
				fail(err)
				return
			}
		}
		return
	}
	// The writer's own connection, through the driver (litetx.go).
	if err := db.withLite(ctx, func(tx *Tx) { db.commitMembers(tx, live, fail, started) }); err != nil {
		fail(err)
	}
}

// rerunAfterAbort settles a pipelined group whose transaction the server
// aborted while member cur was appending (-1: at the COMMIT): the member
// whose statement failed keeps that statement's error (cur's own error
// when no member is to blame: its flush met a failed connection or
// transaction), and every other member without an error of its own is
// returned, with no outcome, to run again in a new transaction. The
// deferred rollback ends tx.
func (db *DB) rerunAfterAbort(tx *Tx, live []*member, cur int) (again []*member) {
	j, err := tx.blamed()
	if j < 0 || j == cur {
		j = cur
		if j >= 0 {
			err = live[j].err // as appendMember shaped it
		}
	}
	for k, o := range live {
		switch {
		case k == j:
			o.evs, o.err = nil, err
			delete(db.tips, o.runID)
		case o.err == nil || k == cur:
			// k == cur: its error was another member's failure.
			o.evs, o.err = nil, nil
			again = append(again, o)
		default:
			// rolled back to its savepoint earlier, with its own error
			o.evs = nil
			delete(db.tips, o.runID)
		}
	}
	return again
}

// commitMembers appends every live member inside tx, each in a savepoint
// when there are several, and commits. On a pipelined PostgreSQL
// transaction the members' statements travel together, with the COMMIT
// (or before a read); a member whose statement the server refused leaves
// the transaction aborted (no savepoint can be trusted then: a batch that
// failed while preparing ran none of its statements, its SAVEPOINT and the
// previous member's RELEASE included): that member keeps its error, and
// the others are returned, with no outcome, to be run again in a new
// transaction (rerunAfterAbort).
func (db *DB) commitMembers(tx *Tx, live []*member, fail func(error), started time.Time) (again []*member) {
	ctx := context.Background()
	tips := map[string]tip{} // tips moved in this transaction
	failed := map[string]bool{}
	ok := 0
	if len(live) == 1 {
		m := live[0]
		if m.evs, m.err = db.appendMember(tx, tips, m); m.err != nil {
			delete(db.tips, m.runID)
			return
		}
		ok = 1
	} else {
		for i, m := range live {
			if _, err := tx.Exec(ctx, "SAVEPOINT append_member"); err != nil {
				fail(&Error{Op: "append: savepoint", Path: db.path, Err: classify(err)})
				return
			}
			mark := tx.mark()
			tx.own(i)
			m.evs, m.err = db.appendMember(tx, tips, m)
			tx.own(-1)
			end := []string{"RELEASE append_member"}
			if m.err != nil && tx.aborted() {
				return db.rerunAfterAbort(tx, live, i)
			}
			if m.err != nil {
				tx.discardSince(mark)
				failed[m.runID] = true
				end = []string{"ROLLBACK TO append_member", "RELEASE append_member"}
			} else {
				ok++
			}
			for _, q := range end {
				if _, err := tx.Exec(ctx, q); err != nil {
					fail(&Error{Op: "append: end savepoint", Path: db.path, Err: fmt.Errorf("%w (after: %v)", classify(err), m.err)})
					return
				}
			}
		}
	}
	if ok == 0 {
		for _, m := range live {
			delete(db.tips, m.runID)
		}
		return
	}
	if err := tx.Commit(); err != nil {
		if j, _ := tx.blamed(); j >= 0 && len(live) > 1 {
			return db.rerunAfterAbort(tx, live, -1) // a member's statement failed with the COMMIT's batch
		}
		if tx.pipe == nil {
			err = &Error{Op: "append: commit", Path: db.path, Err: classify(err)}
		} // else shaped already: a lone member's statements failed with the COMMIT's batch, or the COMMIT did
		fail(err)
		return
	}
	db.group.commits.Add(1)
	db.group.appends.Add(int64(ok))
	db.committed()
	for run, t := range tips {
		db.tips[run] = t
	}
	for run := range failed {
		delete(db.tips, run) // re-read the tip next time
	}
	if db.group.observer != nil {
		db.observeCommit(started, live)
	}
	return nil
}
