package events

import (
	"context"
	"time"
)

// CommitInfo describes one durable append commit to a CommitObserver.
type CommitInfo struct {
	// Latency is the batch's transaction time: from BEGIN to the return of
	// a COMMIT that made it durable (the fsync on SQLite at FULL, the WAL
	// flush on PostgreSQL).
	Latency time.Duration
	// Appends holds the events each Append or AppendAfter committed by this
	// transaction (one slice per call, in commit order). The slices are
	// the DB's and valid only during the call: an observer must not keep
	// them.
	Appends [][]Event
}

// CommitObserver sees every durable append commit (metrics, operator
// tooling). It is called after the COMMIT returned and before the
// appenders of the batch wake, with the write lock held: it must be quick,
// must not block and must not append to or otherwise write to the DB.
type CommitObserver func(CommitInfo)

// ObserveCommits makes fn see every later durable append commit of db;
// nil stops it. Without an observer the append path does no extra work:
// no clock reads, no allocations.
func (db *DB) ObserveCommits(fn CommitObserver) {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	db.group.observer = fn
	if fn == nil {
		db.group.observed = nil
	}
}

// observeCommit reports a committed batch to the observer; it is called
// by commitBatch with db.wmu held, started being the time BEGIN was
// issued.
func (db *DB) observeCommit(started time.Time, live []*member) {
	buf := db.group.observed[:0]
	for _, m := range live {
		if m.err == nil {
			buf = append(buf, m.evs)
		}
	}
	db.group.observed = buf
	db.group.observer(CommitInfo{Latency: time.Since(started), Appends: buf})
	clear(buf) // the DB does not keep the appenders' events alive
}

// DefaultPingTimeout bounds Ping when its context has no earlier deadline.
const DefaultPingTimeout = 2 * time.Second

// Ping checks that the database answers a query (SELECT 1) within the
// context's deadline, or DefaultPingTimeout: a worker's health check. The
// error names the database without its password.
func (db *DB) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultPingTimeout)
	defer cancel()
	var one int
	if err := db.x.QueryRowContext(ctx, `SELECT 1`).Scan(&one); err != nil {
		return &Error{Op: "ping", Path: db.path, Err: classify(err)}
	}
	return nil
}
