package events

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Transient errors (PostgreSQL). A fleet's database restarts, fails over,
// sits behind a pooler, and ends sessions (pg_terminate_backend,
// idle_session_timeout): each of these fails the statements of one
// connection, and the next connection of the pool works. Such a failure
// is retried with backoff for as long as the lease it serves allows
// (retryTransient); only a lost lease stops a run. An append whose COMMIT
// may have run before the connection dropped is not simply sent again:
// the log is read first to learn whether it committed (append.go).

// sqlstateTransient are the SQLSTATEs (and classes, by their first two
// characters) that say "this session or transaction failed, try again".
var sqlstateTransient = map[string]bool{
	"57P01": true, // admin_shutdown: pg_terminate_backend, a restart, a failover
	"57P02": true, // crash_shutdown
	"57P03": true, // cannot_connect_now: starting up, shutting down, in recovery
	"57P05": true, // idle_session_timeout
	"40001": true, // serialization_failure
	"40P01": true, // deadlock_detected
	"08":    true, // connection_exception and its subclasses
}

// Transient reports a PostgreSQL failure that another attempt, on another
// connection, may not meet: the codes above, a connection lost or refused
// before an answer (EOF, reset, a network error, pgx's own connection
// errors), or a connection database/sql found bad. SQLite's errors are
// never transient here (its busy timeout already waits).
func Transient(err error) bool {
	if err == nil {
		return false
	}
	if c := pgCode(err); c != "" {
		return sqlstateTransient[c] || (len(c) == 5 && sqlstateTransient[c[:2]])
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.EPIPE),
		errors.As(err, &ce), errors.As(err, &ne), pgconn.SafeToRetry(err):
		return true
	}
	// pgconn reports a use of a connection it already closed by text only.
	return strings.Contains(err.Error(), "conn closed")
}

// connectionLost reports a transient error that ended its connection
// (not a transaction aborted for another's sake): the pool's idle
// connections were most likely ended with it (a restart, a failover, an
// operator terminating a worker's sessions, the same idle timeout).
func connectionLost(err error) bool {
	c := pgCode(err)
	return Transient(err) && c != sqlstateSerialization && c != sqlstateDeadlock
}

// dropIdle closes the pool's idle connections after a connection was
// lost, so that the retry opens a new one rather than meet the next dead
// one (database/sql pings a pooled connection only after a second idle).
func (db *DB) dropIdle() {
	db.x.SetMaxIdleConns(0)
	db.x.SetMaxIdleConns(pgMaxIdleConns)
}

// backoff is the wait before retry n (0, 1, …): 25 ms doubling to 1 s.
func backoff(n int) time.Duration {
	return min(25*time.Millisecond<<min(n, 6), time.Second)
}

// TransientErrors counts the transient PostgreSQL errors this process
// met since Open (0 on SQLite), retried or, past a lease's deadline,
// returned: a worker's metric.
func (db *DB) TransientErrors() int64 {
	if db.pg == nil {
		return 0
	}
	return db.pg.transient.Load()
}

// retryTransient runs fn until it succeeds, fails with an error that is
// not transient, or the next try would start after deadline (a lease's
// end: past it, the work is not this process's any more) or ctx ends. It
// returns fn's last error. fn must be safe to run again after a transient
// failure.
func (db *DB) retryTransient(ctx context.Context, deadline time.Time, fn func() error) error {
	for n := 0; ; n++ {
		err := fn()
		if err == nil || db.pg == nil || !Transient(err) {
			return err
		}
		db.pg.transient.Add(1)
		wait := backoff(n)
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		if connectionLost(err) {
			db.dropIdle()
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// leaseDeadline is when this process's lease of runID lapses by its own
// clock (the heartbeat moves it on), or bound when it holds none (an
// append without a lease: its retries are bounded all the same).
func (db *DB) leaseDeadline(runID string, bound time.Time) time.Time {
	p := db.pg
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.leases[runID]; l != nil {
		return l.deadline
	}
	return bound
}
