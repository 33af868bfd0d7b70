package workflow

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow/spec"
)

// The queue (issue 14 item 4). A queued run is an ordinary run whose
// run.created says queued: true (state "queued" in the runs projection);
// nothing else is recorded until a worker claims it by appending
// run.started {worker, command} as seq 2, a compare-and-append after seq 1
// made under the run's lock, so two workers never both start it. From
// there on it is a run like any other: a worker that dies leaves it
// "running" with its lock free, and the next worker resumes it with the
// resume rules.

// ErrNotQueued reports a run that is no longer waiting in the queue:
// another worker claimed it first, or it never was queued.
var ErrNotQueued = errors.New("workflow: run is not queued")

// ErrStopped reports a run that stopped before its next task because
// Runner.Stop was closed; it has no run.finished and can be resumed.
var ErrStopped = errors.New("workflow: run stopped before its next task; resume carries it on")

// runCreated is the run.created payload of a new run of wf.
func runCreated(id string, wf *spec.Workflow, inputs map[string]any, opts RunOptions) vocab.RunCreated {
	servers := map[string]string{}
	for name, s := range wf.Spec.MCPServers {
		servers[name] = s.URL
	}
	return vocab.RunCreated{RunID: id, Workflow: wf.Metadata.Name, File: wf.File, Digest: wf.Digest, Source: string(wf.Source),
		Inputs: inputs, Mode: opts.Mode, SourceRunID: opts.SourceRunID, Servers: servers, Command: opts.Command}
}

// Submit records a run of wf with the resolved inputs as queued and
// returns its id; nothing is sent. A worker executes it (RunQueued).
func (r *Runner) Submit(ctx context.Context, wf *spec.Workflow, inputs map[string]any, opts RunOptions) (string, error) {
	opts.Mode = "run"
	if opts.Command == "" {
		opts.Command = "submit"
	}
	id := NewRunID("run")
	if r.NewRunID != nil {
		id = r.NewRunID()
	}
	created := runCreated(id, wf, inputs, opts)
	created.Queued = true
	rec := events.Record{Stream: "run", Type: vocab.TypeRunCreated, Payload: created}
	if _, err := r.DB.AppendAfter(ctx, id, 0, []events.Record{rec}, projector.Apply); err != nil {
		return "", err
	}
	return id, nil
}

// RunQueued claims the queued run runID and executes it from its recorded
// workflow and inputs, as Run would have. It fails with ErrNotQueued
// (wrapped) when the run was claimed by someone else or never queued, and
// with events.ErrRunBusy when another process holds the run; in both cases
// nothing was recorded. worker names the claimant in run.started.
func (r *Runner) RunQueued(ctx context.Context, runID, worker string) (*Result, error) {
	unlock, err := r.DB.LockRun(runID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	l, err := loadRunLog(ctx, r.DB, runID)
	if err != nil {
		return nil, err
	}
	if !l.created.Queued || l.lastSeq != 1 {
		return nil, fmt.Errorf("run %s: %w (its log is at seq %d)", runID, ErrNotQueued, l.lastSeq)
	}
	wf, err := spec.Parse(l.created.File, []byte(l.created.Source))
	if err != nil {
		return nil, &Error{RunID: runID, Code: ExitInvalid, Err: fmt.Errorf("queued run %s: recorded workflow: %w", runID, err)}
	}
	rn := newRun(r, wf, runID, l.created.Inputs)
	started := vocab.RunStarted{Worker: worker, Command: "worker"}
	if err := rn.appendAfter(1, events.Record{Stream: "run", Type: vocab.TypeRunStarted, Payload: started}); err != nil {
		if errors.Is(err, events.ErrConflict) {
			return nil, fmt.Errorf("run %s: %w: %w", runID, ErrNotQueued, err)
		}
		return nil, err
	}
	return rn.execute(ctx), nil
}

// WorkerName is this process's name in run.started: host/pid.
func WorkerName() string {
	host, err := os.Hostname()
	if err != nil {
		host = "localhost"
	}
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// stopping reports whether Runner.Stop was closed.
func (rn *run) stopping() bool {
	if rn.r.Stop == nil {
		return false
	}
	select {
	case <-rn.r.Stop:
		return true
	default:
		return false
	}
}

// stopped ends this process's part of the run without run.finished: the
// records waiting to ride with the next step (the last task's outcome) are
// committed, the sessions closed, and the run stays "running" for a resume.
func (rn *run) stopped() *Result {
	rn.closeSessions()
	if err := rn.append(); err != nil {
		return &Result{RunID: rn.id, State: "running", ExitCode: ExitStorage, Err: &Error{RunID: rn.id, Code: ExitStorage, Err: fmt.Errorf("stop: record the last outcome: %w", err)}}
	}
	return &Result{RunID: rn.id, State: "running", ExitCode: ExitCancelled, Err: &Error{RunID: rn.id, Code: ExitCancelled, Err: ErrStopped}}
}

// Candidate is a run a worker may take: queued, or running (then it is an
// orphan only if Queue.Orphaned says its writer is gone).
type Candidate struct {
	RunID string `db:"run_id"`
	State string `db:"state"`
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
	err := x.SelectContext(ctx, &out, `SELECT run_id, state FROM runs WHERE state = 'running' AND mode = 'run' ORDER BY run_id`)
	if err == nil {
		err = x.SelectContext(ctx, &next, x.Rebind(`SELECT run_id, state FROM runs WHERE state = 'queued' AND mode = 'run' ORDER BY run_id LIMIT ?`), queued)
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
