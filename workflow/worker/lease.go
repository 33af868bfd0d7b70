package worker

import (
	"context"

	"github.com/agentctl/agentctl/events"
)

// ClaimingQueue is a Queue whose runs are claimed rather than listed: what
// Claim returns is already this process's (a lease on PostgreSQL), so the
// worker executes it without asking Orphaned, and the run's LockRun adopts
// the claim. Release gives back a claim the worker did not use.
type ClaimingQueue interface {
	Queue
	// Claim takes up to n runs to execute now, none of except (runs this
	// worker already took: a worker takes a run at most once in its life).
	Claim(ctx context.Context, n int, except []string) ([]Candidate, error)
	// Release gives back runID's claim unless a LockRun adopted it; it is
	// called once the worker's part in the run has ended.
	Release(runID string)
}

// LeaseQueue is the queue of a PostgreSQL database shared by a fleet of
// workers: a worker claims queued runs, and running runs whose lease
// expired or was released (their writer died, stopped, or lost its
// lease), with FOR UPDATE SKIP LOCKED, so two workers never claim one run;
// the run's lease then fences every append (events.ClaimRuns). The Worker
// chooses it when its DB is PostgreSQL and Queue is nil.
type LeaseQueue struct{ DB *events.DB }

var _ ClaimingQueue = LeaseQueue{}

// Claim takes the leases of up to n runs, oldest first.
func (q LeaseQueue) Claim(ctx context.Context, n int, except []string) ([]Candidate, error) {
	cs, err := q.DB.ClaimRuns(ctx, n, except)
	if err != nil {
		return nil, err
	}
	out := make([]Candidate, len(cs))
	for i, c := range cs {
		out[i] = Candidate{RunID: c.RunID, State: c.State, Created: c.Created}
	}
	return out, nil
}

// Release gives back a claim no LockRun adopted.
func (q LeaseQueue) Release(runID string) { q.DB.ReleaseClaim(runID) }

// Candidates lists what LocalQueue lists: the runs projection is the same
// on both backends. The worker claims through Claim instead.
func (q LeaseQueue) Candidates(ctx context.Context, queued int) ([]Candidate, error) {
	return LocalQueue(q).Candidates(ctx, queued)
}

// Orphaned reports whether nobody holds a live lease on runID (a probe
// that claims nothing).
func (q LeaseQueue) Orphaned(runID string) bool { return LocalQueue(q).Orphaned(runID) }
