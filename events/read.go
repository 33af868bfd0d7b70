package events

import (
	"context"
	"fmt"
	"math"
)

// ErrNoRun reports a run id with no events.
var ErrNoRun = fmt.Errorf("events: no such run")

// Events returns every event of a run in seq order.
func (db *DB) Events(ctx context.Context, runID string) ([]Event, error) {
	var evs []Event
	err := db.Scan(ctx, runID, 0, func(e Event) error {
		evs = append(evs, e)
		return nil
	})
	return evs, err
}

// Scan calls fn for each event of runID with seq > after, in order, without
// holding the whole run in memory.
func (db *DB) Scan(ctx context.Context, runID string, after int64, fn func(Event) error) error {
	return db.ScanRange(ctx, runID, after+1, math.MaxInt64, fn)
}

// ScanRange calls fn for each event of runID with from <= seq <= to, in
// order.
func (db *DB) ScanRange(ctx context.Context, runID string, from, to int64, fn func(Event) error) error {
	return db.scan(ctx, `SELECT run_id, seq, stream, type, payload, created_at, prev_hash, hash FROM events WHERE run_id = ? AND seq BETWEEN ? AND ? ORDER BY seq`,
		[]any{runID, from, to}, func(e *Event) []any {
			return []any{&e.RunID, &e.Seq, &e.Stream, &e.Type, &e.Payload, &e.CreatedAt, &e.PrevHash, &e.Hash}
		}, fn)
}

// ScanPayloads is Scan for readers of payloads (replay's index of a run,
// inspect): each Event has RunID, Seq, Stream, Type, Payload, CreatedAt and
// Hash (its chain version tells the codec whether a result was written in
// clear), and no PrevHash, which it does not read.
func (db *DB) ScanPayloads(ctx context.Context, runID string, fn func(Event) error) error {
	return db.scan(ctx, `SELECT seq, stream, type, payload, created_at, hash FROM events WHERE run_id = ? ORDER BY seq`,
		[]any{runID}, func(e *Event) []any {
			e.RunID = runID
			return []any{&e.Seq, &e.Stream, &e.Type, &e.Payload, &e.CreatedAt, &e.Hash}
		}, fn)
}

// scan runs query and calls fn with each row, read into an Event through
// the fields cols names.
func (db *DB) scan(ctx context.Context, query string, args []any, cols func(*Event) []any, fn func(Event) error) error {
	rows, err := db.x.QueryContext(ctx, query, args...)
	if err != nil {
		return &Error{Op: "read events", Path: db.path, Err: classify(err)}
	}
	defer rows.Close()
	for rows.Next() {
		e := Event{codec: db.enc}
		if err := rows.Scan(cols(&e)...); err != nil {
			return &Error{Op: "read events", Path: db.path, Err: err}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return &Error{Op: "read events", Path: db.path, Err: classify(err)}
	}
	return nil
}

// HashAt returns the chain hash of runID's event at seq.
func (db *DB) HashAt(ctx context.Context, runID string, seq int64) (string, error) {
	var h string
	if err := db.x.GetContext(ctx, &h, `SELECT hash FROM events WHERE run_id = ? AND seq = ?`, runID, seq); err != nil {
		return "", &Error{Op: fmt.Sprintf("read hash of seq %d of run %s", seq, runID), Path: db.path, Err: classify(err)}
	}
	return h, nil
}

// RunExists reports whether runID has at least one event.
func (db *DB) RunExists(ctx context.Context, runID string) (bool, error) {
	var n int
	if err := db.x.GetContext(ctx, &n, `SELECT COUNT(*) FROM events WHERE run_id = ? AND seq = 1`, runID); err != nil {
		return false, &Error{Op: "read events", Path: db.path, Err: classify(err)}
	}
	return n > 0, nil
}

// Bind lets an event read outside this package (a projection rebuild that
// scans inside its own transaction) decode encrypted payloads with db's key.
func (db *DB) Bind(e Event) Event {
	e.codec = db.enc
	return e
}
