package workflow

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow/spec"
)

// The queue (issue 14 item 4). A queued run is an ordinary run whose
// run.created says queued: true (state "queued" in the runs projection);
// nothing else is recorded until a worker claims it by appending
// run.started {worker, command} as seq 2, a compare-and-append after seq 1
// made under the run's lock (and on PostgreSQL its lease), so two workers
// never both start it. From there on it is a run like any other: a worker
// that dies leaves it "running" with its lock free, and the next worker
// resumes it with the resume rules.
//
// run.started is not a commit of its own: it rides the run's first commit
// (the first call's intent, or run.finished of a run that sends nothing),
// which is then the compare-and-append after seq 1 (firstCommit, as
// run.created rides a direct run's first commit). A worker that lost the
// race learns it from that commit, which fails as a whole: its intent is
// not recorded, so the call is not sent, and RunQueued reports
// ErrNotQueued. A worker that dies before that commit leaves the run
// queued with nothing of its own recorded and nothing sent (no intent was
// durable, so no call went out; a session handshake of the worker's pool
// may have been, which has no effect): the next worker claims it as
// queued, on PostgreSQL once the dead worker's lease expires.
//
// On PostgreSQL a worker's claim (events.ClaimRuns) also returns the
// queued run's run.created, which RunQueuedClaimed starts from without
// reading the log, and the run's last commit (run.finished) releases the
// lease in its own transaction (events.DB.AppendFinal): a queued one-call
// run costs three commits, the claim, the intent and the outcome.

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
		Inputs: inputs, Mode: opts.Mode, SourceRunID: opts.SourceRunID, Servers: servers, Command: opts.Command,
		TraceParent: opts.TraceParent, TraceState: opts.TraceState}
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
	return r.RunQueuedClaimed(ctx, runID, worker, nil)
}

// RunQueuedClaimed is RunQueued given the run's run.created as the
// worker's claim read it (events.Claim.Created), which spares it the
// read of the log; nil reads the log. Either way the run starts only by a
// compare-and-append after seq 1, so a stale created is refused as
// ErrNotQueued with nothing sent.
func (r *Runner) RunQueuedClaimed(ctx context.Context, runID, worker string, created *events.Event) (*Result, error) {
	unlock, err := r.DB.LockRun(runID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	rc, err := queuedCreated(ctx, r.DB, runID, created)
	if err != nil {
		return nil, err
	}
	wf, err := r.queuedSpec(rc)
	if err != nil {
		return nil, &Error{RunID: runID, Code: ExitInvalid, Err: fmt.Errorf("queued run %s: recorded workflow: %w", runID, err)}
	}
	rn := newRun(r, wf, runID, rc.Inputs)
	started := events.Record{Stream: "run", Type: vocab.TypeRunStarted, Payload: vocab.RunStarted{Worker: worker, Command: "worker"}}
	rn.created = &firstCommit{rec: &started, c: &carry{done: make(chan struct{})}, after: 1}
	res := rn.requireQueuedLogins(ctx)
	if res == nil {
		res = rn.execute(ctx)
	}
	if err := rn.flushCreated(); err != nil {
		if errors.Is(err, events.ErrConflict) {
			return nil, fmt.Errorf("run %s: %w: %w", runID, ErrNotQueued, err)
		}
		return nil, err
	}
	return res, nil
}

// queuedCreated is the run.created of the queued run runID: created (the
// claim's read) when given, else read from the log, which must hold it
// alone.
func queuedCreated(ctx context.Context, db *events.DB, runID string, created *events.Event) (vocab.RunCreated, error) {
	if created == nil {
		l, err := loadRunLog(ctx, db, runID)
		if err != nil {
			return vocab.RunCreated{}, err
		}
		if !l.created.Queued || l.lastSeq != 1 {
			return vocab.RunCreated{}, fmt.Errorf("run %s: %w (its log is at seq %d)", runID, ErrNotQueued, l.lastSeq)
		}
		return l.created, nil
	}
	if created.RunID != runID || created.Seq != 1 || created.Type != vocab.TypeRunCreated {
		return vocab.RunCreated{}, fmt.Errorf("run %s: claimed %s at seq %d of run %s, want its run.created", runID, created.Type, created.Seq, created.RunID)
	}
	rc, err := vocab.DecodeRunCreated(*created)
	if err != nil {
		return vocab.RunCreated{}, fmt.Errorf("run %s: read run.created: %w", runID, err)
	}
	if !rc.Queued {
		return vocab.RunCreated{}, fmt.Errorf("run %s: %w (it was not submitted)", runID, ErrNotQueued)
	}
	return rc, nil
}

// queuedSpec parses a queued run's recorded workflow, once per source
// when the runner has a SpecCache.
func (r *Runner) queuedSpec(rc vocab.RunCreated) (*spec.Workflow, error) {
	if r.Specs != nil {
		return r.Specs.parse(rc.File, rc.Source)
	}
	return spec.Parse(rc.File, []byte(rc.Source))
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
	closed := rn.closeSessions()
	defer closed()
	if err := rn.append(); err != nil {
		return &Result{RunID: rn.id, State: "running", ExitCode: ExitStorage, Err: &Error{RunID: rn.id, Code: ExitStorage, Err: fmt.Errorf("stop: record the last outcome: %w", err)}}
	}
	return &Result{RunID: rn.id, State: "running", ExitCode: ExitCancelled, Err: &Error{RunID: rn.id, Code: ExitCancelled, Err: ErrStopped}}
}

// SpecCache holds the workflows of queued runs parsed once per workflow
// source (keyed by the source's digest, computed here, and the file name)
// for the runs of one worker: a drain of many runs of one workflow parses
// it once, not once a run. A parsed spec.Workflow is never written by a
// run (the runs of one worker share it at once), so handing out the same
// one is safe. Safe for concurrent use; the zero value is ready.
type SpecCache struct {
	mu sync.Mutex
	m  map[string]*spec.Workflow
}

// maxSpecCache bounds a SpecCache: past it, it starts again empty.
const maxSpecCache = 64

// parse returns the workflow of file and src, parsed once.
func (c *SpecCache) parse(file, src string) (*spec.Workflow, error) {
	sum := sha256.Sum256([]byte(src))
	key := file + "\x00" + string(sum[:])
	c.mu.Lock()
	wf := c.m[key]
	c.mu.Unlock()
	if wf != nil {
		return wf, nil
	}
	wf, err := spec.Parse(file, []byte(src))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxSpecCache {
		c.m = map[string]*spec.Workflow{}
	}
	c.m[key] = wf
	c.mu.Unlock()
	return wf, nil
}
