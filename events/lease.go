package events

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Run leases on PostgreSQL (docs/POSTGRES.md, "Leases and fencing").
//
// A kernel lock cannot span machines, and a session-bound mechanism (an
// advisory lock) dies with one connection: a pooler, a failover or
// pg_terminate_backend would hand a live worker's runs to others. So on
// PostgreSQL a run's writer holds a lease, and liveness is the lease alone:
// the run's row in run_leases names its owner (this process:
// host/pid/random), an epoch that goes up at every claim, and an expiry
// by the database's clock. The lifecycle:
//
//   - claim: LockRun (one run) or ClaimRuns (a worker's batch of queued
//     and expired runs, FOR UPDATE SKIP LOCKED) sets owner, epoch+1 and
//     expiry where the row is free: released or expired (a crashed
//     process's runs are taken once their lease runs out). A row this
//     owner holds without knowing it (a claim whose answer a dropped
//     connection lost) is claimed again. A run ClaimRuns took is handed
//     to the next LockRun of it in this process.
//   - heartbeat: every TTL/3 each lease is renewed, on any connection of
//     the pool, where owner, epoch and an unexpired expiry still match. A
//     renewal that fails with a transient error is tried again with
//     backoff (transient.go) until the lease's local deadline; no row, or
//     a deadline passed, means the lease is lost.
//   - fencing: every append of a run checks in its own transaction (the
//     row read FOR SHARE, so a claim waits for the commit) that this
//     process holds the current, unexpired epoch; a writer holding no lease
//     for the run may append only while no one holds a live one. The
//     database enforces the same rule on every INSERT into events, from
//     any client (migration 0004). A lost lease is remembered, and every
//     later append of the run fails at once with ErrLeaseLost.
//   - release: unlock clears owner and expiry if the lease is still ours.

// DefaultLeaseTTL is a run lease's life without a heartbeat.
const DefaultLeaseTTL = 30 * time.Second

// ErrLeaseLost reports that this process no longer owns a run it was
// writing: its lease expired or another process took it over. Nothing more
// of the run is appended by this process.
var ErrLeaseLost = errors.New("events: run lease lost")

// LeaseLostError names the run and the epoch whose lease was lost; it
// matches ErrLeaseLost.
type LeaseLostError struct {
	RunID string
	Epoch int64
}

func (e *LeaseLostError) Error() string {
	return fmt.Sprintf("run %s: lease lost at epoch %d; another worker owns it", e.RunID, e.Epoch)
}

// Unwrap makes errors.Is(err, ErrLeaseLost) hold.
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// lease is one run this process owns on PostgreSQL.
type lease struct {
	runID string
	epoch int64
	// adopted: a LockRun holds it (a ClaimRuns claim not yet adopted is
	// waiting for its LockRun).
	adopted bool
	lost    bool
	// tip is the run's last event as the claim read it (a queued run's
	// run.created), until the first append uses it (claimedTip).
	tip *tip
	// releasing: an AppendFinal carrying the release is in flight; a
	// renewal that finds the row gone (released by it) is not a loss.
	releasing bool
	// deadline is when the lease lapses by this process's clock: the
	// time the last successful claim or renewal was sent, plus the TTL.
	deadline time.Time
	// pending: a new run's lease (LockNewRun) whose row the run's first
	// commit inserts; until that commit nothing of the run, its lease
	// included, is in the database, so there is nothing to renew or
	// release.
	pending bool
}

// pgState is what a PostgreSQL DB holds beyond the pool: the run leases
// this process owns and their heartbeat.
type pgState struct {
	owner  string
	ttl    time.Duration // fixed at Open (Options.LeaseTTL)
	mu     sync.Mutex    // guards leases and each lease's fields
	leases map[string]*lease
	losses atomic.Int64
	// transient counts the transient errors retried (transient.go).
	transient atomic.Int64
	hbOnce    sync.Once
	stop      chan struct{}
	done      chan struct{}

	// noDelete: this role may not delete run_leases rows, so a release
	// keeps a finished run's row (releaseOrDelete was refused once).
	noDelete atomic.Bool
	// privOnce asks once whether this role may delete (AppendFinal).
	privOnce sync.Once
}

func newPGState(ttl time.Duration) *pgState {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return &pgState{owner: leaseOwner(), ttl: ttl, leases: map[string]*lease{}, stop: make(chan struct{}), done: make(chan struct{})}
}

// leaseOwner is this process's name in run_leases.owner: host/pid/random,
// so a restarted process with a recycled pid is not mistaken for its
// predecessor.
func leaseOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// LeaseOwner is the owner this process writes in run_leases ("" on
// SQLite), as `runs list` shows it.
func (db *DB) LeaseOwner() string {
	if db.pg == nil {
		return ""
	}
	return db.pg.owner
}

// LeaseLosses counts the leases this process lost since Open (a metric of
// the worker: each is a run another worker took over, or whose heartbeat
// failed past its expiry).
func (db *DB) LeaseLosses() int64 {
	if db.pg == nil {
		return 0
	}
	return db.pg.losses.Load()
}

const (
	// claimRun takes runID's lease where it is free or expired, or held by
	// this owner without its knowing (LockRun reaches the claim only for a
	// run it holds no lease on: a row in its name is a claim whose answer
	// was lost with a connection); the row is created for a run that has
	// none yet (a new run's LockRun precedes its run.created).
	claimRun = `INSERT INTO run_leases (run_id, owner, owner_key, lease_epoch, lease_expires_at)
VALUES (?, ?, NULL, 1, now() + ?::bigint * interval '1 millisecond')
ON CONFLICT (run_id) DO UPDATE SET owner = EXCLUDED.owner, owner_key = NULL,
    lease_epoch = run_leases.lease_epoch + 1, lease_expires_at = EXCLUDED.lease_expires_at
WHERE agentctl_lease_free(run_leases.owner, run_leases.owner_key, run_leases.lease_expires_at)
   OR run_leases.owner = EXCLUDED.owner
RETURNING lease_epoch`
	// claimRuns takes up to n claimable runs for a worker: queued, or
	// running with no live lease (their writer died, let go, or was paused
	// past its expiry), or held by this owner but none of the runs it
	// knows it holds (a lost answer, as for claimRun), skipping rows
	// another claimer has locked. The candidates are a MATERIALIZED CTE,
	// selected once: as `WHERE run_id IN (subquery … LIMIT n … SKIP
	// LOCKED)` the planner may run the subquery more than once (a rescan
	// as the tables grow), so one statement could claim more than n runs;
	// the claims past the worker's free slots then sat held by it,
	// unstarted, until a drain ended and let them go, still queued.
	claimRuns = `WITH c AS MATERIALIZED (
    SELECT l.run_id, r.state FROM run_leases l JOIN runs r ON r.run_id = l.run_id
    WHERE r.mode = 'run' AND r.state IN ('queued', 'running')
      AND (agentctl_lease_free(l.owner, l.owner_key, l.lease_expires_at) OR l.owner = ?)
      AND NOT (l.run_id = ANY(?::text[]))
    ORDER BY l.run_id LIMIT ? FOR UPDATE OF l SKIP LOCKED)
UPDATE run_leases SET owner = ?, owner_key = NULL, lease_epoch = run_leases.lease_epoch + 1,
    lease_expires_at = now() + ?::bigint * interval '1 millisecond'
FROM c LEFT JOIN events e ON e.run_id = c.run_id AND e.seq = 1 AND c.state = 'queued'
WHERE run_leases.run_id = c.run_id
RETURNING run_leases.run_id, run_leases.lease_epoch, c.state,
    e.seq, e.stream, e.type, e.payload, e.created_at, e.prev_hash, e.hash`
	renewLease = `UPDATE run_leases SET lease_expires_at = now() + ?::bigint * interval '1 millisecond'
WHERE run_id = ? AND owner = ? AND lease_epoch = ? AND lease_expires_at > now()`
	// nameLease names, for the rest of the transaction, the lease the
	// appender holds on a run ("run epoch owner"), or none (""): the
	// events trigger refuses the insert unless that lease is live
	// (sqlstateFenceLost) or, naming none, nobody holds a live one
	// (sqlstateFenceBusy); its FOR SHARE makes a concurrent claim wait for
	// this transaction's end (migrations/sql/postgres/0012). A ROLLBACK TO
	// SAVEPOINT takes the setting back with its member.
	nameLease = `SELECT set_config('agentctl.lease', ?, true)`
	// leaseLive counts (0 or 1) the live lease of a run at an epoch.
	leaseLive = `SELECT count(*) FROM run_leases WHERE run_id = ? AND owner = ? AND lease_epoch = ? AND lease_expires_at > now()`
	// insertNewLease takes the lease of a run that has no row yet, inside
	// the run's first commit (LockNewRun): a row already there (a run id
	// taken) fails the commit on the key.
	insertNewLease = `INSERT INTO run_leases (run_id, owner, owner_key, lease_epoch, lease_expires_at)
VALUES (?, ?, NULL, 1, now() + ?::bigint * interval '1 millisecond')`
)

// lockRunPostgres makes this process the run's writer by lease: it adopts
// a claim ClaimRuns made, or claims the run now.
func (db *DB) lockRunPostgres(runID string) (func(), error) {
	p := db.pg
	p.mu.Lock()
	if l := p.leases[runID]; l != nil {
		if l.adopted || l.lost {
			p.mu.Unlock()
			return nil, fmt.Errorf("%w: %s", ErrRunBusy, runID)
		}
		fresh := time.Until(l.deadline) > p.ttl*2/3
		p.mu.Unlock()
		// The claim may have lapsed while this process could not run (a
		// pause): say so now rather than load a log another owns. A claim
		// made less than a third of its TTL ago by this process's clock
		// (a worker adopts its claims at once) cannot have: the database's
		// expiry is later than the local deadline (sent + TTL), and no one
		// takes a live lease. It is not asked about (a round trip per run).
		if !fresh {
			if err := db.checkClaim(l); err != nil {
				return nil, err
			}
		}
		p.mu.Lock()
		l.adopted = true
		p.mu.Unlock()
		return db.releaseFunc(l), nil
	}
	ttl := p.ttl
	p.mu.Unlock()
	var sent time.Time
	var epoch int64
	err := db.retryTransient(context.Background(), time.Now().Add(ttl), func() error {
		sent = time.Now()
		return db.x.QueryRowContext(context.Background(), claimRun, runID, p.owner, ttl.Milliseconds()).Scan(&epoch)
	})
	if errors.Is(err, sql.ErrNoRows) {
		return nil, db.leasedError(runID)
	}
	if err != nil {
		return nil, &Error{Op: "claim lease of run " + runID, Path: db.path, Err: classify(err)}
	}
	l := &lease{runID: runID, epoch: epoch, adopted: true, deadline: sent.Add(ttl)}
	p.mu.Lock()
	p.leases[runID] = l
	p.mu.Unlock()
	db.startHeartbeat()
	return db.releaseFunc(l), nil
}

// lockNewRunPostgres is LockNewRun on PostgreSQL: the lease is held here
// at once and its row is inserted by the run's first commit (fence), whose
// tip is known (the run has no event yet: a run id already in the log
// fails that commit on the log's key).
func (db *DB) lockNewRunPostgres(runID string) (func(), error) {
	p := db.pg
	p.mu.Lock()
	if p.leases[runID] != nil {
		p.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrRunBusy, runID)
	}
	l := &lease{runID: runID, epoch: 1, adopted: true, pending: true, tip: &tip{}}
	p.leases[runID] = l
	p.mu.Unlock()
	db.startHeartbeat()
	return db.releaseFunc(l), nil
}

// leaseTaken settles a committed member that inserted its run's new
// lease: the row is in, renewed from now on, lapsing TTL after the commit
// was sent by this process's clock (the database's expiry is later).
func (db *DB) leaseTaken(m *member, sent time.Time) {
	if !m.newLease {
		return
	}
	p := db.pg
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.leases[m.runID]; l != nil && l.pending {
		l.pending = false
		l.deadline = sent.Add(p.ttl)
	}
}

// leasedError is LockRun's refusal of a run another process holds a live
// lease on. Right after a kill -9 the server may not have reaped the dead
// writer's session yet, so it names the owner and the expiry (the row is
// read again, only on this failure) and says when a retry will succeed.
func (db *DB) leasedError(runID string) error {
	var owner sql.NullString
	var expires sql.NullTime
	err := db.x.QueryRowContext(context.Background(), `SELECT owner, lease_expires_at FROM run_leases WHERE run_id = ?`, runID).Scan(&owner, &expires)
	if err != nil || !owner.Valid || !expires.Valid {
		// The row changed since the claim (released, say): a retry may
		// succeed at once.
		return fmt.Errorf("%w: %s (leased by another process; retry, and `agentctl runs list` shows the owner)", ErrRunBusy, runID)
	}
	until := expires.Time.UTC().Format(time.RFC3339)
	return fmt.Errorf("%w: %s (leased by %s until %s; if that process is gone, retry after %s; `agentctl runs list` shows the owner)",
		ErrRunBusy, runID, owner.String, until, until)
}

// checkClaim makes sure claim l is still this process's current,
// unexpired lease; if not, it is lost.
func (db *DB) checkClaim(l *lease) error {
	var one int
	db.pg.mu.Lock()
	deadline := l.deadline
	db.pg.mu.Unlock()
	err := db.retryTransient(context.Background(), deadline, func() error {
		return db.x.QueryRowContext(context.Background(), `SELECT 1 FROM run_leases
WHERE run_id = ? AND owner = ? AND lease_epoch = ? AND lease_expires_at > now()`, l.runID, db.pg.owner, l.epoch).Scan(&one)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		db.loseLease(l)
		return &LeaseLostError{RunID: l.runID, Epoch: l.epoch}
	case err != nil:
		return &Error{Op: "check lease of run " + l.runID, Path: db.path, Err: classify(err)}
	}
	return nil
}

// fence names, inside the append transaction tx, the lease this process
// holds on runID (or none), which the events trigger checks when the
// member's events are inserted (see the lifecycle above; insertEvents
// reads its verdict). A new run's lease (LockNewRun) is inserted here, in
// the run's first commit. On a pipelined append the statements travel
// with the member's writes.
func (db *DB) fence(ctx context.Context, tx *Tx, runID string) (newLease bool, err error) {
	p := db.pg
	p.mu.Lock()
	l := p.leases[runID]
	var epoch int64
	var lost, pending bool
	if l != nil {
		epoch, lost, pending = l.epoch, l.lost, l.pending
	}
	p.mu.Unlock()
	if lost {
		return false, &LeaseLostError{RunID: runID, Epoch: epoch}
	}
	failed := func(err error) error {
		return &Error{Op: "append: name the lease of run " + runID, Path: db.path, Err: classify(err)}
	}
	if l == nil {
		return false, tx.execWrap(ctx, failed, nameLease, "")
	}
	if pending {
		err := tx.execWrap(ctx, func(err error) error {
			if pgCode(err) == sqlstateUniqueViolation {
				return fmt.Errorf("append to run %s: %w: the run's lease row exists already (%v)", runID, ErrRunBusy, err)
			}
			return &Error{Op: "append: take the lease of new run " + runID, Path: db.path, Err: classify(err)}
		}, insertNewLease, runID, p.owner, p.ttl.Milliseconds())
		if err != nil {
			return false, err
		}
	}
	return pending, tx.execWrap(ctx, failed, nameLease, runID+" "+strconv.FormatInt(epoch, 10)+" "+p.owner)
}

// leaseGone asks, after an append of runID refused as a conflict, whether
// this process's lease of the run is still live; if not the lease is lost
// (as the trigger's fence would have said) and that is the error. nil when
// the lease is live, when there is none, or when the database cannot say.
func (db *DB) leaseGone(ctx context.Context, runID string) error {
	p := db.pg
	p.mu.Lock()
	l := p.leases[runID]
	var epoch int64
	live := l != nil && !l.pending && !l.lost
	if live {
		epoch = l.epoch
	}
	p.mu.Unlock()
	if !live {
		return nil
	}
	var n int
	err := db.x.QueryRowContext(context.WithoutCancel(ctx), leaseLive, runID, p.owner, epoch).Scan(&n)
	if err != nil || n > 0 {
		return nil
	}
	db.loseLease(l)
	return &LeaseLostError{RunID: runID, Epoch: epoch}
}

// fenceRefused is the error of an events insert the trigger refused for
// its lease: lost (this process's lease of the run is gone: every later
// append fails at once) or busy (another process holds it).
func (db *DB) fenceRefused(runID string, pe *pgconn.PgError) error {
	if pe.Code == sqlstateFenceBusy {
		return fmt.Errorf("append to run %s: %w (%s)", runID, ErrRunBusy, pe.Message)
	}
	db.pg.mu.Lock()
	l := db.pg.leases[runID]
	var epoch int64
	if l != nil {
		epoch = l.epoch
	}
	db.pg.mu.Unlock()
	if l == nil {
		return fmt.Errorf("append to run %s: %w (%s)", runID, ErrLeaseLost, pe.Message)
	}
	db.loseLease(l)
	return &LeaseLostError{RunID: runID, Epoch: epoch}
}
