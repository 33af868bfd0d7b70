package worker

import (
	"context"
	"fmt"
	"os"

	"github.com/agentctl/agentctl/events"
)

// Candidate is a run a worker may take: queued, or running (then it is an
// orphan only if Queue.Orphaned says its writer is gone).
type Candidate struct {
	RunID string `db:"run_id"`
	State string `db:"state"`
	// Created is a claimed queued run's run.created, read by the claim
	// (LeaseQueue); nil when the worker reads it from the log.
	Created *events.Event `db:"-"`
}

// Queue is what a worker needs to know beyond the log: which runs it may
// take, and whether a running run's writer is gone. LocalQueue is the one
// machine's answer (the runs projection and the per-run kernel lock); a
// shared database across machines answers with leases instead.
type Queue interface {
	// Candidates lists the running runs and at most queued of the queued
	// ones, in the order to take them.
	Candidates(ctx context.Context, queued int) ([]Candidate, error)
	// Orphaned reports whether runID's writer is gone, so that a worker
	// may resume it (which must still take the run's ownership, and
	// refuse if another was quicker).
	Orphaned(runID string) bool
}

// The two lists Candidates reads. On SQLite each is read through a
// partial index holding only the runs in its state (migration 0021), not
// a scan of every run recorded: the WHERE terms must stay exactly those of
// the indexes (TestCandidatesUseIndexes).
const (
	runningRuns = `SELECT run_id, state FROM runs WHERE state = 'running' AND mode = 'run' ORDER BY run_id`
	queuedRuns  = `SELECT run_id, state FROM runs WHERE state = 'queued' AND mode = 'run' ORDER BY run_id LIMIT ?`
)

// LocalQueue is the Queue of one database on one machine.
type LocalQueue struct{ DB *events.DB }

// Candidates lists the runs a worker may take: every running run (they
// were started earlier; few run at once), then the oldest queued ones (run
// ids are UUIDv7), at most queued of them, so that a long queue is not
// read whole each time a run ends. Replays and ad-hoc calls are never
// resumed by a worker.
func (q LocalQueue) Candidates(ctx context.Context, queued int) ([]Candidate, error) {
	var out, next []Candidate
	x := q.DB.SQL()
	err := x.SelectContext(ctx, &out, runningRuns)
	if err == nil {
		err = x.SelectContext(ctx, &next, x.Rebind(queuedRuns), queued)
	}
	if err != nil {
		return nil, &events.Error{Op: "list queued runs", Path: q.DB.Path(), Err: err}
	}
	return append(out, next...), nil
}

// Orphaned reports whether runID has no writer: its run lock on the
// database file can be taken (the kernel drops a process's locks when it dies), or on
// PostgreSQL nobody holds a live lease. The probe takes nothing; Resume
// takes the run, and refuses if someone was quicker.
func (q LocalQueue) Orphaned(runID string) bool {
	held, err := q.DB.RunHeld(context.Background(), runID)
	return err == nil && !held
}

// ProcessName is this process's name in run.started: host/pid.
func ProcessName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}
