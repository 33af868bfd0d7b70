package events

import (
	"context"
	"database/sql"
	"sort"
	"time"
)

// Claiming queued and abandoned runs for a worker (ClaimRuns), and
// giving a claim back.

// Claim is a run ClaimRuns took for this process.
type Claim struct {
	RunID string
	// State is the run's state when claimed: "queued" (start it) or
	// "running" (its writer is gone: resume it).
	State string
	Epoch int64
	// Created is a queued run's run.created (seq 1), read by the claim so
	// that the worker starts the run without reading its log; nil for a
	// running run. The run's first append after seq 1 uses its hash as
	// the tip (claimedTip): no read inside that commit either.
	Created *Event
}

// ClaimRuns takes the leases of up to n runs a worker may execute: queued
// runs, and running runs whose lease expired or was released, oldest
// first, none of except. Each claim waits for the run's LockRun in this
// process (RunQueued, Resume), which adopts it; a claim not adopted is
// given back with ReleaseClaim. On SQLite it returns nothing: the local
// queue there is the runs projection and the kernel lock.
func (db *DB) ClaimRuns(ctx context.Context, n int, except []string) ([]Claim, error) {
	if db.pg == nil || n <= 0 {
		return nil, nil
	}
	p := db.pg
	p.mu.Lock()
	ttl := p.ttl
	p.mu.Unlock()
	// Never the runs this process knows it holds: only those is its name
	// it does not know of may be claimed again.
	except = append([]string{}, except...)
	p.mu.Lock()
	for id := range p.leases {
		except = append(except, id)
	}
	p.mu.Unlock()
	var sent time.Time
	var out []Claim
	err := db.retryTransient(ctx, time.Now().Add(ttl), func() error {
		sent, out = time.Now(), nil
		rows, err := db.x.QueryContext(ctx, claimRuns, p.owner, except, n, p.owner, ttl.Milliseconds())
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, err := db.scanClaim(rows)
			if err != nil {
				return err
			}
			out = append(out, c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, &Error{Op: "claim runs", Path: db.path, Err: classify(err)}
	}
	// UPDATE … RETURNING has no order: hand them out oldest first.
	sort.Slice(out, func(i, j int) bool { return out[i].RunID < out[j].RunID })
	p.mu.Lock()
	for _, c := range out {
		l := &lease{runID: c.RunID, epoch: c.Epoch, deadline: sent.Add(ttl)}
		if c.Created != nil {
			l.tip = &tip{seq: c.Created.Seq, hash: c.Created.Hash}
		}
		p.leases[c.RunID] = l
	}
	p.mu.Unlock()
	if len(out) > 0 {
		db.startHeartbeat()
	}
	return out, nil
}

// scanClaim reads one row of claimRuns: the claim, and a queued run's
// run.created.
func (db *DB) scanClaim(rows *sql.Rows) (Claim, error) {
	var c Claim
	var seq sql.NullInt64
	var stream, typ, payload, created, prev, hash sql.NullString
	if err := rows.Scan(&c.RunID, &c.Epoch, &c.State, &seq, &stream, &typ, &payload, &created, &prev, &hash); err != nil {
		return c, err
	}
	if seq.Valid {
		c.Created = &Event{RunID: c.RunID, Seq: seq.Int64, Stream: stream.String, Type: typ.String, Payload: payload.String,
			CreatedAt: created.String, PrevHash: prev.String, Hash: hash.String, codec: db.enc}
	}
	return c, nil
}

// claimedTip is the tip a ClaimRuns claim read for runID, for its first
// append after seq after (-1: any): used once, it spares that commit the
// read of the tip. A stale one cannot write a wrong log: the event at the
// next seq exists then, and the insert fails on the log's key
// (ErrConflict), as the read tip would have said.
func (db *DB) claimedTip(runID string, after int64) (tip, bool) {
	if db.pg == nil {
		return tip{}, false
	}
	p := db.pg
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.leases[runID]
	if l == nil || l.tip == nil || (after >= 0 && l.tip.seq != after) {
		return tip{}, false
	}
	t := *l.tip
	l.tip = nil
	return t, true
}

// ReleaseClaim gives back a claim ClaimRuns made that no LockRun adopted
// (the worker did not execute the run); an adopted lease is left to its
// unlock.
func (db *DB) ReleaseClaim(runID string) {
	if db.pg == nil {
		return
	}
	db.pg.mu.Lock()
	l := db.pg.leases[runID]
	db.pg.mu.Unlock()
	if l != nil && !l.adopted {
		db.releaseLease(l)
	}
}
