package events

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// insertEventsSQL is the statement that inserts n events.
func insertEventsSQL(n int) string {
	const head, row = `INSERT INTO events (run_id, seq, stream, type, payload, created_at, prev_hash, hash) VALUES `, `(?, ?, ?, ?, ?, ?, ?, ?)`
	var b strings.Builder
	b.WriteString(head)
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

// maxInsertRows bounds the rows of one INSERT. A member's events go in as
// few statements as that allows (a call's ≈ 9 in one): on PostgreSQL each
// statement is executor work of its own (a multi-row INSERT halved the
// server time of a call's commit, BENCHMARKS.md), on SQLite a step of its
// own. The chain triggers see each row's predecessor within a statement.
const maxInsertRows = 32

// insertEventsStmt holds the statements for 1 to maxInsertRows rows, built
// by the first append (not at package init: most processes append nothing).
var insertEventsStmt = sync.OnceValue(func() *[maxInsertRows + 1]string {
	var q [maxInsertRows + 1]string
	for n := 1; n <= maxInsertRows; n++ {
		q[n] = insertEventsSQL(n)
	}
	return &q
})

// insertEvents inserts evs (chained, in seq order) in statements of up to
// maxInsertRows rows; a conflict names the seqs of its statement.
func (db *DB) insertEvents(ctx context.Context, tx *Tx, evs []Event) error {
	for len(evs) > 0 {
		chunk := evs[:min(len(evs), maxInsertRows)]
		evs = evs[len(chunk):]
		args := make([]any, 0, 8*len(chunk)) // its own: a PostgreSQL append queues it
		for _, e := range chunk {
			args = append(args, e.RunID, e.Seq, e.Stream, e.Type, e.Payload, e.CreatedAt, e.PrevHash, e.Hash)
		}
		runID, first, last, typ := chunk[0].RunID, chunk[0].Seq, chunk[len(chunk)-1].Seq, chunk[0].Type
		err := tx.execWrap(ctx, func(err error) error {
			if appendConflict(err) {
				return fmt.Errorf("append to run %s at seq %d-%d: %w: someone else appended, reload the tail (%v)", runID, first, last, ErrConflict, err)
			}
			// The fence: the events trigger checks the lease the
			// member named (migration 0012; lease.go, fence).
			if pe := pgError(err); pe != nil && (pe.Code == sqlstateFenceLost || pe.Code == sqlstateFenceBusy) {
				return db.fenceRefused(runID, pe)
			}
			return &Error{Op: fmt.Sprintf("append %s… seq %d-%d", typ, first, last), Path: db.path, Err: classify(err)}
		}, insertEventsStmt()[len(chunk)], args...)
		if err != nil {
			return err
		}
	}
	return nil
}

// Applier updates projections inside the transaction that appends evs.
type Applier func(ctx context.Context, tx *Tx, evs []Event) error

// Append writes recs as the next events of runID and runs apply in the same
// transaction; nothing is visible unless both succeed. It returns the stored
// events with their seq and hashes once they are committed.
//
// Append is safe for concurrent use: appends that arrive while another
// commit is running share the next commit (group commit, groupcommit.go),
// and each caller returns only after the commit of its own records.
func (db *DB) Append(ctx context.Context, runID string, recs []Record, apply Applier) ([]Event, error) {
	return db.append(ctx, runID, -1, recs, apply, false)
}

// ErrConflict reports that a run's log moved on since the caller read it.
var ErrConflict = errors.New("events: conflict: the run has newer events")

// AppendAfter is Append, refused with ErrConflict unless the run's last
// seq is exactly after (0 for a run with no events): a compare-and-append
// for a process that decided what to do from what it read.
func (db *DB) AppendAfter(ctx context.Context, runID string, after int64, recs []Record, apply Applier) ([]Event, error) {
	return db.append(ctx, runID, after, recs, apply, false)
}

// AppendFinal is AppendAfter (after -1: Append) for the run's last commit
// by this process (run.finished): on PostgreSQL the same transaction
// releases this process's lease on the run (lease_release.go), so the
// run's unlock that follows costs no statement; on SQLite it is
// AppendAfter.
func (db *DB) AppendFinal(ctx context.Context, runID string, after int64, recs []Record, apply Applier) ([]Event, error) {
	if db.pg == nil {
		return db.append(ctx, runID, after, recs, apply, false)
	}
	db.checkDeletePrivilege(ctx)
	evs, err := db.append(ctx, runID, after, recs, apply, true)
	db.releasedWith(runID, err == nil)
	return evs, err
}

func (db *DB) append(ctx context.Context, runID string, after int64, recs []Record, apply Applier, release bool) ([]Event, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	var bound time.Time // of the transient retries without a lease: a TTL from the first failure
	for attempt, failures := 1, 0; ; attempt++ {
		m := &member{ctx: ctx, runID: runID, after: after, recs: recs, apply: apply, release: release}
		sent := time.Now()
		db.group.submit(db, m)
		if m.err == nil {
			db.leaseTaken(m, sent)
			return m.evs, nil
		}
		// PostgreSQL may abort a transaction for another's sake (40001,
		// 40P01); nothing of it committed, so it is run again.
		if retryable(m.err) && attempt < maxAppendRetries {
			continue
		}
		if db.pg != nil && errors.Is(m.err, ErrConflict) {
			// A stale writer's insert meets the log's key before the
			// trigger's fence: say that its lease is gone, if it is.
			if lost := db.leaseGone(ctx, runID); lost != nil {
				return nil, lost
			}
		}
		if db.pg == nil || !Transient(m.err) {
			return m.evs, m.err
		}
		// The connection failed (transient.go): the COMMIT may have run.
		if connectionLost(m.err) {
			db.dropIdle()
		}
		if bound.IsZero() {
			bound = time.Now().Add(db.pg.ttl)
		}
		deadline := db.leaseDeadline(runID, bound)
		committed, err := db.appendCommitted(ctx, m.built, deadline)
		if err != nil {
			return nil, m.err
		}
		if committed {
			db.leaseTaken(m, sent)
			return m.built, nil
		}
		db.pg.transient.Add(1)
		wait := backoff(failures)
		failures++
		if time.Now().Add(wait).After(deadline) || !sleepCtx(ctx, wait) {
			return nil, m.err
		}
	}
}

// appendCommitted reports whether evs, the events of an append whose
// connection failed, are in the log: the last one's hash is at its seq
// (it chains every one before it). It reads until the read works or
// deadline passes. No events built means nothing was inserted.
func (db *DB) appendCommitted(ctx context.Context, evs []Event, deadline time.Time) (bool, error) {
	if len(evs) == 0 {
		return false, nil
	}
	last := evs[len(evs)-1]
	var hash string
	err := db.retryTransient(ctx, deadline, func() error {
		return db.x.QueryRowContext(ctx, `SELECT hash FROM events WHERE run_id = ? AND seq = ?`, last.RunID, last.Seq).Scan(&hash)
	})
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, err
	}
	return hash == last.Hash, nil
}

// sleepCtx waits d, or less if ctx ends first (then false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// appendMember writes one member's events and projections inside the
// batch transaction tx. On PostgreSQL its statements are queued: they
// travel with the COMMIT, or with the next read (pgpipe.go), and a
// statement the server refuses is blamed on its member at that flush
// (groupcommit.go, rerunAfterAbort). tips holds the tips this batch has already moved
// (they are in tx, not yet committed); the member's tip is set there on
// success.
func (db *DB) appendMember(tx *Tx, tips map[string]tip, m *member) ([]Event, error) {
	ctx := context.WithoutCancel(m.ctx) // a cancelled statement would roll back the whole batch
	runID := m.runID
	if db.pg != nil {
		// Fencing: only the lease's current holder (or anyone, while no
		// one holds a live lease) appends to the run.
		newLease, err := db.fence(ctx, tx, runID)
		if err != nil {
			return nil, err
		}
		m.newLease = newLease
	}
	t, ok := tips[runID]
	if !ok && m.after < 0 {
		t, ok = db.tips[runID]
	}
	if !ok {
		t, ok = db.claimedTip(runID, m.after) // a worker's claim read it
	}
	if !ok {
		// Compare-and-append always reads the tip inside the transaction.
		if err := tx.flush(ctx); err != nil {
			return nil, err // the fence's verdict
		}
		var err error
		if t, err = readTip(ctx, tx, runID); err != nil {
			return nil, &Error{Op: "append: read tip", Path: db.path, Err: classify(err)}
		}
	}
	if m.after >= 0 && t.seq != m.after {
		return nil, fmt.Errorf("append to run %s after seq %d: %w (last seq is %d)", runID, m.after, ErrConflict, t.seq)
	}
	now := db.Now().UTC().Format(time.RFC3339Nano)
	evs := make([]Event, 0, len(m.recs))
	for _, r := range m.recs {
		payload, err := marshalPayload(r.Payload)
		if err != nil {
			return nil, fmt.Errorf("append %s: encode payload: %w", r.Type, err)
		}
		if !utf8.ValidString(payload) {
			// The chain hashes a JSON re-encoding that would fold invalid
			// bytes into U+FFFD: refuse them rather than hash two texts alike.
			return nil, fmt.Errorf("append %s: payload is not valid UTF-8", r.Type)
		}
		if db.enc.enabled && protectedType(r.Type) {
			if payload, err = db.enc.seal(runID, payload); err != nil {
				return nil, &Error{Op: fmt.Sprintf("append %s: encrypt payload", r.Type), Path: db.path, Err: err}
			}
		} else if m := sealedMember(r.Type); db.enc.enabled && m != "" {
			if payload, err = db.enc.sealMember(runID, r.Type, m, payload); err != nil {
				return nil, &Error{Op: fmt.Sprintf("append %s: encrypt %s", r.Type, m), Path: db.path, Err: err}
			}
		}
		e := Event{RunID: runID, Seq: t.seq + 1, Stream: r.Stream, Type: r.Type, Payload: payload, CreatedAt: now, PrevHash: t.hash, codec: db.enc, value: typedValue(r.Payload)}
		e.Hash = ChainHash(ChainLatest, e)
		t = tip{seq: e.Seq, hash: e.Hash}
		evs = append(evs, e)
	}
	m.built = evs
	if err := db.insertEvents(ctx, tx, evs); err != nil {
		return nil, err
	}
	if m.apply != nil {
		if err := m.apply(ctx, tx, evs); err != nil {
			return nil, fmt.Errorf("append: project: %w", err)
		}
	}
	if m.release {
		if err := db.releaseInTx(ctx, tx, runID); err != nil {
			return nil, err
		}
	}
	tips[runID] = t
	return evs, nil
}

func readTip(ctx context.Context, tx *Tx, runID string) (tip, error) {
	var t tip
	row, err := tx.QueryRow(ctx, `SELECT seq, hash FROM events WHERE run_id = ? ORDER BY seq DESC LIMIT 1`, runID)
	if err != nil {
		return t, err
	}
	err = row.Scan(&t.seq, &t.hash)
	if errors.Is(err, sql.ErrNoRows) {
		return tip{}, nil
	}
	return t, err
}

// typedValue is the payload's Go value when Decode may hand it out instead
// of parsing: a struct value (the projector's payload types), not bytes, a
// pointer or a map that the caller could still change.
func typedValue(p any) any {
	if p == nil || reflect.TypeOf(p).Kind() != reflect.Struct {
		return nil
	}
	return p
}
