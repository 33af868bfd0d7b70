package events

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Keeping leases: losing one, the heartbeat that renews them, releasing
// them all at close, and reading who holds a run.

// loseLease records that l is no longer ours: counted once, and every
// later append of the run fails at once.
func (db *DB) loseLease(l *lease) {
	p := db.pg
	p.mu.Lock()
	defer p.mu.Unlock()
	if !l.lost {
		l.lost = true
		p.losses.Add(1)
	}
}

// startHeartbeat starts the goroutine renewing this process's leases
// every TTL/3, once; Close stops it. A beat whose renewal failed with a
// transient error (a dropped connection) is followed by another after a
// backoff, not a third of the TTL later.
func (db *DB) startHeartbeat() {
	p := db.pg
	p.hbOnce.Do(func() {
		p.mu.Lock()
		every := p.ttl / 3
		p.mu.Unlock()
		go func() {
			defer close(p.done)
			t := time.NewTimer(every)
			defer t.Stop()
			failures := 0
			for {
				select {
				case <-p.stop:
					return
				case <-t.C:
					if _, failed := db.renewLeases(context.Background()); failed > 0 {
						t.Reset(min(backoff(failures), every))
						failures++
					} else {
						t.Reset(every)
						failures = 0
					}
				}
			}
		}()
	})
}

// RenewLeases renews every lease this process holds once, as the
// heartbeat does every TTL/3, and returns how many it lost now: a lease
// whose row no longer matches (expired, or taken over), or whose renewal
// failed after its local deadline.
func (db *DB) RenewLeases(ctx context.Context) (lost int) {
	lost, _ = db.renewLeases(ctx)
	return lost
}

// renewLeases is RenewLeases, also counting the renewals that failed
// before their lease's deadline (to be tried again soon).
func (db *DB) renewLeases(ctx context.Context) (lost, failed int) {
	if db.pg == nil {
		return 0, 0
	}
	p := db.pg
	p.mu.Lock()
	ttl := p.ttl
	held := make([]*lease, 0, len(p.leases))
	for _, l := range p.leases {
		if !l.lost && !l.pending {
			held = append(held, l)
		}
	}
	p.mu.Unlock()
	for _, l := range held {
		var sent time.Time
		var n int64
		p.mu.Lock()
		until := time.Now().Add(ttl / 3) // then the next beat tries again
		if l.deadline.Before(until) {
			until = l.deadline
		}
		p.mu.Unlock()
		err := db.retryTransient(ctx, until, func() error {
			sent = time.Now()
			cctx, cancel := context.WithTimeout(ctx, max(ttl/3, time.Second))
			defer cancel()
			res, err := db.x.ExecContext(cctx, renewLease, ttl.Milliseconds(), l.runID, p.owner, l.epoch)
			if err == nil {
				n, err = res.RowsAffected()
			}
			return err
		})
		switch {
		case err != nil:
			p.mu.Lock()
			past := time.Now().After(l.deadline)
			p.mu.Unlock()
			if !past {
				p.transient.Add(1)
				failed++
				continue // try again soon (startHeartbeat)
			}
		case n == 1:
			p.mu.Lock()
			l.deadline = sent.Add(ttl)
			p.mu.Unlock()
			continue
		}
		p.mu.Lock()
		releasing := l.releasing || p.leases[l.runID] != l
		p.mu.Unlock()
		if releasing {
			continue // released meanwhile (AppendFinal, an unlock): not lost
		}
		db.loseLease(l)
		lost++
	}
	return lost, failed
}

// close stops the heartbeat and gives back every lease still held (a
// worker that stops lets another take its runs at once).
func (p *pgState) close(db *DB) {
	if p == nil {
		return
	}
	select {
	case <-p.stop:
		return
	default:
		close(p.stop)
	}
	started := true
	p.hbOnce.Do(func() { started = false })
	if started {
		<-p.done
	}
	p.mu.Lock()
	held := make([]*lease, 0, len(p.leases))
	for _, l := range p.leases {
		held = append(held, l)
	}
	p.mu.Unlock()
	for _, l := range held {
		db.releaseLease(l)
	}
}

// RunLease is who holds a run's lease and until when (by the database's
// clock), as `runs list` shows it.
type RunLease struct {
	Owner     string
	ExpiresAt time.Time
}

// RunLeases returns the leases held on runIDs (released and never-claimed
// runs are absent); nil on SQLite, which has no leases.
func (db *DB) RunLeases(ctx context.Context, runIDs []string) (map[string]RunLease, error) {
	if db.pg == nil || len(runIDs) == 0 {
		return nil, nil
	}
	rows, err := db.x.QueryContext(ctx, `SELECT run_id, owner, lease_expires_at FROM run_leases
WHERE run_id = ANY(?::text[]) AND owner IS NOT NULL AND lease_expires_at IS NOT NULL`, runIDs)
	if err != nil {
		return nil, &Error{Op: "read run leases", Path: db.path, Err: classify(err)}
	}
	defer rows.Close()
	out := map[string]RunLease{}
	for rows.Next() {
		var id string
		var l RunLease
		if err := rows.Scan(&id, &l.Owner, &l.ExpiresAt); err != nil {
			return nil, &Error{Op: "read run leases", Path: db.path, Err: classify(err)}
		}
		out[id] = l
	}
	if err := rows.Err(); err != nil {
		return nil, &Error{Op: "read run leases", Path: db.path, Err: classify(err)}
	}
	return out, nil
}

// RunHeld reports whether some process is the run's writer now, without
// becoming it: `inspect --follow` asks this of an idle run, and `runs
// list` and `inspect` of every run recorded running (a run no one holds is
// shown interrupted); a probe must not bump the lease epoch. On SQLite it
// tests the run's lock byte without taking it (on Linux; elsewhere it
// takes the lock and gives it back at once).
func (db *DB) RunHeld(ctx context.Context, runID string) (bool, error) {
	if db.pg == nil {
		return db.locks.probe(db.path, runID)
	}
	var held bool
	err := db.x.QueryRowContext(ctx, `SELECT NOT agentctl_lease_free(owner, owner_key, lease_expires_at) FROM run_leases WHERE run_id = ?`, runID).Scan(&held)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, &Error{Op: "read the lease of " + runID, Path: db.path, Err: classify(err)}
	}
	return held, nil
}
