package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/workflow/spec"
)

// Run states recorded in run.finished and task.finished.
const (
	StateSucceeded = "succeeded"
	StateFailed    = "failed"
	StateUncertain = "uncertain"
	StateCancelled = "cancelled"
)

// Runner executes workflows and records every protocol step in the log
// before acting on it. A Runner may run one workflow at a time.
type Runner struct {
	DB *events.DB
	// Dialer opens remotes; nil means the network (package transport).
	Dialer Dialer
	// UserAgent is sent to servers; "" lets transport choose.
	UserAgent string
	// Getenv resolves {env: NAME} secret references; nil = os.Getenv.
	Getenv func(string) string
	// Observe, when set, sees every event right after it is committed
	// (progress display, JSONL streaming). It must not block for long.
	Observe func(events.Event)
	// NewRunID makes run ids; nil = "run-" + UUIDv7.
	NewRunID func() string
	// Now is the clock retry schedules are computed with; nil = time.Now.
	Now func() time.Time
	// Wait waits before a retry (d may be ≤ 0); nil = a timer honouring ctx.
	Wait func(ctx context.Context, d time.Duration) error
	// Jitter, when set, turns a retry's computed wait into the one used
	// (recorded in task.retry_scheduled, so resume and replay reuse it).
	Jitter func(time.Duration) time.Duration
	// TraceContext, when set, gives the transport of a run's remotes its
	// per-request W3C trace context (telemetry on); nil sends none.
	TraceContext func(runID string) func() (traceparent, tracestate string)
	// Credentials keeps the OAuth credentials of remotes with an auth
	// block; nil = the database's (CredentialStore).
	Credentials oauth.Store
	// AllowPlaintextCredentials lets the database's CredentialStore keep
	// tokens in clear when the database is not encrypted.
	AllowPlaintextCredentials bool
	// Stop, when set and closed, stops the run before its next task starts,
	// without run.finished: the run stays resumable (the worker's graceful
	// shutdown). Tasks in flight finish first.
	Stop <-chan struct{}
	// Sessions, when set, lets the run share MCP sessions and their tool
	// catalogs with the other runs of this process (a worker's pool); nil
	// opens the run's own, as agentctl run does.
	Sessions *SessionPool
	// Specs, when set, parses the workflows of queued runs once per
	// source for the runs that share it (a worker's); nil parses each.
	Specs *SpecCache
}

// RunOptions describe how a run came to be.
type RunOptions struct {
	Mode        string // "run" (default), "replay", "adhoc"
	SourceRunID string
	Command     string
	// Concurrency, when > 0, overrides spec.concurrency (`run --concurrency N`).
	Concurrency int
	// TraceParent and TraceState (W3C trace context), recorded in
	// run.created: the run's telemetry continues the caller's trace.
	TraceParent, TraceState string
}

// Result is how a run ended.
type Result struct {
	RunID    string
	State    string
	Outputs  map[string]any
	ExitCode int
	Err      error
}

// Error is a run that ended other than succeeded; Code is its exit code.
type Error struct {
	RunID string
	Code  int
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// NewRunID returns "run-" + a UUIDv7 (time-ordered).
func NewRunID(prefix string) string {
	id, err := uuid.NewV7()
	if err != nil {
		id = uuid.New()
	}
	return prefix + "-" + id.String()
}

// EffectID is the call identity and idempotency key (docs/ARCHITECTURE.md):
// hex(sha256(runId NUL taskId NUL attempt NUL ordinal NUL "mcp.call" NUL inputDigest)).
func EffectID(runID, taskID string, attempt, ordinal int, inputDigest string) string {
	h := sha256.New()
	for i, part := range []string{runID, taskID, strconv.Itoa(attempt), strconv.Itoa(ordinal), "mcp.call", inputDigest} {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Run executes wf with the resolved inputs. A non-nil error means nothing
// was recorded (storage failure before run.created); otherwise the Result
// says how the run ended, and Result.Err is an *Error when it did not succeed.
func (r *Runner) Run(ctx context.Context, wf *spec.Workflow, inputs map[string]any, opts RunOptions) (*Result, error) {
	if opts.Mode == "" {
		opts.Mode = "run"
	}
	newID := r.NewRunID
	if newID == nil {
		prefix := "run"
		if opts.Mode == "replay" {
			prefix = "replay"
		}
		newID = func() string { return NewRunID(prefix) }
	}
	rn := newRun(r, wf, newID(), inputs)
	switch {
	case opts.Mode == "replay":
		// A replay sends nothing, so it gains nothing from overlapping
		// tasks: one at a time makes it deterministic whatever the
		// interleaving of the source (calls are matched per task).
		rn.concurrency, rn.replay = 1, true
	case opts.Concurrency > 0:
		rn.concurrency = opts.Concurrency
	}
	// Held while the run goes on, so that a resume of it waits its end.
	unlock, err := r.DB.LockNewRun(rn.id)
	if err != nil {
		return nil, err
	}
	defer unlock()
	created := events.Record{Stream: "run", Type: vocab.TypeRunCreated, Payload: runCreated(rn.id, wf, inputs, opts)}
	if r.TraceContext != nil || r.Observe != nil {
		// Telemetry reads the run's trace context from run.created when
		// a remote is dialed, before the first commit; an observer (the
		// CLI's progress, JSONL) is shown the run before anything is
		// sent, and can stop it then (a closed stdout).
		if err := rn.append(created); err != nil {
			return nil, err
		}
	} else {
		rn.created = &firstCommit{rec: &created, c: &carry{done: make(chan struct{})}, after: -1}
	}
	res := rn.execute(ctx)
	if err := rn.flushCreated(); err != nil {
		return nil, err
	}
	return res, nil
}

// firstCommit holds run.created until the run's first commit: whichever
// lane commits first carries it, and every other commit waits until that
// one is durable, so run.created is the run's first event and nothing of
// the run is on disk without it. Nothing with an effect is sent before a
// commit (the call's intent is durable first), so a crash before this one
// leaves no trace of a run that did nothing. A queued run's run.started
// waits the same way (RunQueued), its commit a compare-and-append after
// run.created (after).
type firstCommit struct {
	mu  sync.Mutex
	rec *events.Record // nil once a commit took it
	c   *carry         // settled when the commit that took rec returned
	// after, when ≥ 0, makes the commit carrying rec a compare-and-append
	// after that seq (events.ErrConflict if the log moved on).
	after int64
}

// takeCreated returns run.created if this commit is the run's first (the
// caller carries it and settles c), or the carry of the first commit to
// wait for; both nil when there is none pending (resume, a run whose
// first commit is done).
func (rn *run) takeCreated() (*events.Record, *carry) {
	f := rn.created
	if f == nil {
		return nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rec := f.rec
	f.rec = nil
	return rec, f.c
}

// flushCreated commits run.created alone if no commit took it (a run
// stopped before its first step) and reports whether it is durable: an
// error means nothing of the run was recorded.
func (rn *run) flushCreated() error {
	f := rn.created
	if f == nil {
		return nil
	}
	f.mu.Lock()
	untaken := f.rec != nil
	f.mu.Unlock()
	if untaken {
		if err := rn.fork().append(); err != nil {
			return err
		}
	}
	<-f.c.done
	return f.c.err
}

// run is one task's view of a run (or the run's own, for run-level
// events): the state the run's tasks share, plus the records this task
// holds for its next commit. Each task of a concurrent run works on its
// own fork, so its deferred records ride only with its own commits.
type run struct {
	*runState
	// pending are records waiting to commit with this lane's next append.
	pending []events.Record
	// waitFor are carries (deferred records of finished tasks this task
	// needs) that another task's first commit carries: this lane's first
	// append waits until they are durable, so the tasks it needs are
	// recorded finished before anything of its own.
	waitFor []*carry
	// carrying are the carries this lane's next append commits.
	carrying []*carry
	// view is the template scope the task renders with: the outputs of
	// the tasks that had ended when it started.
	view spec.Scope
	// replayCall is the call of the lane's latest attempt in a replay,
	// which records its source's verdicts on it (replay_follow.go).
	replayCall *call
}

// runState is what the tasks of one run share. mu guards the maps; the
// rest is set before the tasks start.
type runState struct {
	r     *Runner
	wf    *spec.Workflow
	id    string
	scope spec.Scope
	// concurrency is how many tasks may be in flight at once.
	concurrency int
	// replay: the run answers from a recorded one; retries do not wait.
	replay bool
	// listing: the run lists a remote's tools (`mcp tools`), so its
	// session.catalog records every tool whole (catalog_record.go).
	listing bool
	mu      sync.Mutex
	remotes map[string]*remoteState // guarded by mu
	conns   map[string]Conn         // guarded by mu
	gens    map[string]int          // guarded by mu
	// protos: the protocol version each remote's first session spoke, as
	// recorded (resume): a remote pinned to auto keeps it for the run.
	protos map[string]string
	opened []*remoteState // every session opened, closed at the end; guarded by mu
	// sessMu serialises opening sessions, so concurrent tasks share one.
	sessMu sync.Mutex
	// log is the run as recorded before a resume; nil for a fresh run.
	log *runLog
	// obsMu serialises the observer, which sees events in seq order
	// whatever order concurrent commits return in.
	obsMu   sync.Mutex
	obsNext int64
	obsHeld map[int64]events.Event
	// contracts holds the tasks' compiled outputSchemas.
	contracts contractSchemas
	// created is run.created until the run's first commit carries it;
	// nil when the run was created otherwise (resume, an ad hoc run).
	created *firstCommit
	// authQ holds auth.step records until the next commit (auth.go).
	authMu sync.Mutex
	authQ  []events.Record
}

func newRun(r *Runner, wf *spec.Workflow, id string, inputs map[string]any) *run {
	return &run{runState: &runState{r: r, wf: wf, id: id, scope: spec.Scope{Inputs: inputs, Tasks: map[string]any{}}, concurrency: wf.TaskConcurrency(),
		remotes: map[string]*remoteState{}, conns: map[string]Conn{}, gens: map[string]int{}, obsHeld: map[int64]events.Event{}}}
}

// fork returns a new lane of the same run, with nothing pending.
func (rn *run) fork() *run { return &run{runState: rn.runState} }

// later queues records to commit with the next append: records that need
// not be durable before anything else happens ride along with the next
// protocol step, so a call costs two commits, not seven.
func (rn *run) later(recs ...events.Record) {
	rn.pending = append(rn.pending, recs...)
}

// append commits pending records plus recs as one transaction, with the
// projection updates, then shows them to the observer.
func (rn *run) append(recs ...events.Record) error {
	return rn.appendAfter(-1, recs...)
}

// appendAfter is append, refused with events.ErrConflict unless the run's
// last seq is still after (-1: any). Resume uses it so that two processes
// resuming one run cannot both go on.
func (rn *run) appendAfter(after int64, recs ...events.Record) error {
	return rn.commit(after, false, recs)
}

// commit is appendAfter; final marks the run's last commit by this
// process (run.finished), which on PostgreSQL also releases the run's
// lease in its transaction (events.DB.AppendFinal).
func (rn *run) commit(after int64, final bool, recs []events.Record) error {
	if err := rn.awaitCarries(); err != nil {
		return err
	}
	created, first := rn.takeCreated()
	if created == nil && first != nil {
		<-first.done
		if first.err != nil {
			err := fmt.Errorf("the run's first commit was not recorded: %w", first.err)
			for _, c := range rn.carrying {
				c.settle(err)
			}
			rn.carrying = nil
			return err
		}
	}
	if len(rn.pending) > 0 {
		recs = append(rn.pending, recs...)
		rn.pending = nil
	}
	if q := rn.takeAuthSteps(); len(q) > 0 {
		recs = append(q, recs...)
	}
	if created != nil {
		recs = append([]events.Record{*created}, recs...)
		rn.carrying = append(rn.carrying, first)
		if after < 0 {
			after = rn.created.after
		}
	}
	recs = factsOnly(recs)
	var evs []events.Event
	var err error
	switch {
	case final:
		evs, err = rn.r.DB.AppendFinal(context.Background(), rn.id, after, recs, projector.Apply)
	case after < 0:
		evs, err = rn.r.DB.Append(context.Background(), rn.id, recs, projector.Apply)
	default:
		evs, err = rn.r.DB.AppendAfter(context.Background(), rn.id, after, recs, projector.Apply)
	}
	for _, c := range rn.carrying {
		c.settle(err)
	}
	rn.carrying = nil
	if err != nil {
		return err
	}
	rn.observe(evs)
	return nil
}

// awaitCarries waits until the commits this lane must follow (waitFor)
// are durable.
func (rn *run) awaitCarries() error {
	for _, c := range rn.waitFor {
		<-c.done
		if c.err != nil {
			return fmt.Errorf("a commit this task waits for (a task it needs, or its session's catalog) failed: %w", c.err)
		}
	}
	rn.waitFor = nil
	return nil
}

// observe shows committed events to the observer in seq order: a batch that commits after a later one of another task is held
// until the gap before it is shown.
func (rn *run) observe(evs []events.Event) {
	if len(evs) == 0 || rn.r.Observe == nil {
		return
	}
	rn.obsMu.Lock()
	defer rn.obsMu.Unlock()
	if rn.obsNext == 0 {
		rn.obsNext = evs[0].Seq
	}
	for _, e := range evs {
		rn.obsHeld[e.Seq] = e
	}
	for {
		e, ok := rn.obsHeld[rn.obsNext]
		if !ok {
			return
		}
		delete(rn.obsHeld, rn.obsNext)
		rn.obsNext++
		if rn.r.Observe != nil {
			rn.r.Observe(e)
		}
	}
}

func (rn *run) finish(outputs map[string]any, fail *Error) *Result {
	closed := rn.closeSessions()
	defer closed()
	res := &Result{RunID: rn.id, State: StateSucceeded, Outputs: outputs}
	p := vocab.RunFinished{State: StateSucceeded, Outputs: outputs}
	if fail != nil {
		res.State, res.ExitCode, res.Err = stateFor(fail.Code, fail.Err), fail.Code, fail
		p.State, p.ExitCode, p.Error = res.State, fail.Code, fail.Err.Error()
	}
	if err := rn.commit(-1, true, []events.Record{{Stream: "run", Type: vocab.TypeRunFinished, Payload: p}}); err != nil {
		res.State, res.ExitCode = StateFailed, ExitStorage
		res.Err = &Error{RunID: rn.id, Code: ExitStorage, Err: fmt.Errorf("record run.finished: %w", err)}
	}
	return res
}

func stateForExit(code int) string {
	switch code {
	case ExitUncertain:
		return StateUncertain
	case ExitCancelled:
		return StateCancelled
	case ExitOK:
		return StateSucceeded
	}
	return StateFailed
}
