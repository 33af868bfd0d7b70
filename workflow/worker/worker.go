package worker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/migrations"
	"github.com/agentctl/agentctl/workflow"
)

// Worker executes queued runs, several at once in one process, and resumes
// runs whose process died. Each run gets its own workflow.Runner; they all share
// one events.DB, so their appends share commits (group commit).
//
// Which runs are whose: a run is "queued" until a worker claims it
// (workflow.Runner.RunQueued); a run is "running" and orphaned when its per-run
// lock (events.DB.LockRun, a kernel lock that dies with its process) can
// be taken: its writer is gone, and the worker resumes it (workflow.Runner.Resume:
// a call found dispatched with no outcome is an ambiguous failure, so
// at_most_once and unknown calls end uncertain and are never sent again).
// A worker takes a run at most once in its life: a run it stopped or could
// not resume waits for another worker or an operator.
//
// On PostgreSQL (LeaseQueue, chosen when Queue is nil) the runs are
// claimed, not listed: a lease per run (events.ClaimRuns) taken from the
// queued runs and the running ones whose lease expired or whose owner's
// session is gone, renewed by a heartbeat and checked by every append. A
// worker that loses a lease (it was paused past it, or its database was
// unreachable) stops writing that run, which another worker has taken
// over: its Result says StateLeaseLost. With Drain, "nothing left to
// take" does not wait for runs other live workers hold.
//
// Stopping: when the context passed to Run is cancelled (SIGTERM,
// SIGINT), the worker takes no new run and closes workflow.Runner.Stop: each run
// finishes the task in flight and stops before the next, left resumable.
// Runs still in flight after Grace are abandoned as they are: Run returns
// ErrGraceExpired and the caller should exit; nothing is cancelled, so a
// call in flight is never recorded as cancelled, and a later worker
// resumes it by the rules.
type Worker struct {
	DB *events.DB
	// Queue says which runs may be taken; nil means the SQLite queue over
	// DB (LocalQueue).
	Queue Queue
	// NewRunner returns the workflow.Runner of one run (with DB set to the worker's).
	NewRunner func() *workflow.Runner
	// Concurrency is how many runs execute at once; ≤ 0 means 4.
	Concurrency int
	// Drain makes Run return once no run is left to take and none is in
	// flight; otherwise Run polls for new runs until its context ends.
	Drain bool
	// Poll is the interval between looks at the queue; ≤ 0 means 200 ms.
	Poll time.Duration
	// Grace bounds the wait for runs in flight after the context ends;
	// ≤ 0 means 30 s.
	Grace time.Duration
	// Name identifies the worker in run.started; "" means ProcessName().
	Name string
	// Started and Finished, when set, see each run as it is taken and as
	// its part in this worker ends. They are called from one goroutine.
	Started  func(runID string, resumed bool)
	Finished func(Result)
	// Stopping, when set, is called once the context has ended and the
	// runs in flight were told to stop before their next task.
	Stopping func()
	// Transient, when set, sees each transient database error met while
	// looking for runs (the look is tried again after a backoff); it is
	// called from Run's goroutine.
	Transient func(error)
	// NoSessionReuse makes every run open its own MCP sessions. By default
	// the runs of one Run share them (workflow.SessionPool): a remote's
	// session and tool catalog serve every run with the same remote
	// identity, each run's log recording which session it borrowed.
	NoSessionReuse bool
	// Sessions, when set, is the pool the runs share (its owner closes
	// it); nil means a new one for each Run, closed when Run returns.
	Sessions *workflow.SessionPool
}

// Result is what became of one run a worker took.
type Result struct {
	RunID   string  `json:"runId"`
	Resumed bool    `json:"resumed"` // an orphan resumed, not a queued run started
	State   string  `json:"state"`   // the run's state when the worker let go of it
	Exit    int     `json:"exitCode"`
	Error   *string `json:"error"`
	// Skipped: another process took the run first; the worker did nothing.
	Skipped bool `json:"skipped,omitempty"`
}

// StateLeaseLost is a Result's state when the worker lost the run's
// lease (PostgreSQL) and stopped writing it: another worker owns it.
const StateLeaseLost = "lease_lost"

// ErrGraceExpired reports that runs were still in flight when the grace
// period after a stop ended; they are left for a resume.
var ErrGraceExpired = errors.New("worker: grace period expired with runs in flight")

// Run takes and executes runs until the queue is drained (Drain) or ctx
// ends, and returns what became of every run it took.
func (w *Worker) Run(ctx context.Context) ([]Result, error) {
	l := w.newLoop()
	defer close(l.jobs) // the idle runners end
	if l.sessions != nil && w.Sessions == nil {
		defer l.sessions.Close()
	}
	ticker := time.NewTicker(l.poll)
	defer ticker.Stop()
	ctxDone := ctx.Done()
	var graceOver <-chan time.Time
	for {
		stopping := l.stopped || l.fail != nil
		if !stopping && l.inflight < l.conc && !time.Now().Before(l.retryAt) {
			list, ok := l.list(ctx)
			if !ok {
				continue
			}
			if startedAny := l.take(list); w.Drain && l.inflight == 0 && !startedAny && l.transient == 0 {
				return l.out, nil
			}
		}
		if stopping && l.inflight == 0 {
			return l.out, l.fail
		}
		tick := ticker.C
		if stopping || l.inflight >= l.conc {
			tick = nil
		}
		select {
		case r := <-l.done:
			l.idle++ // its runner waits for the next run now
			l.finished(r)
		case <-tick:
		case <-ctxDone:
			ctxDone, graceOver = nil, time.After(l.grace)
			l.stopTaking()
		case <-graceOver:
			return l.out, fmt.Errorf("%w: %d run(s) left for resume", ErrGraceExpired, l.inflight)
		}
	}
}

// workerLoop is the state of one Worker.Run, owned by its goroutine.
type workerLoop struct {
	w           *Worker
	conc        int
	poll, grace time.Duration
	name        string
	queue       Queue
	claiming    ClaimingQueue // queue, when it claims
	stop        chan struct{} // closed: runs stop before their next task
	done        chan Result
	// jobs hands a taken run to an idle runner: a goroutine that executed
	// a run before and waits for the next (idle of them), so that a run
	// neither starts a goroutine nor grows a new one's stack again (the
	// stack a run needs is copied several times over as a fresh
	// goroutine's grows: about 5% of a one-call run's CPU). Closed when
	// Run returns: the idle runners end.
	jobs     chan job
	idle     int
	taken    map[string]bool
	out      []Result
	inflight int
	stopped  bool  // ctx ended
	fail     error // a storage failure listing the queue: stop taking runs
	// A transient database error (a dropped connection, a restart: see
	// events.Transient) listing the queue is not a failure: the next poll
	// tries again at retryAt, after a backoff while the errors go on.
	retryAt   time.Time
	transient int
	// sessions is the pool the runs share (nil: NoSessionReuse).
	sessions *workflow.SessionPool
	// specs parses each queued workflow once for the runs of this loop.
	specs *workflow.SpecCache
}

// newLoop applies w's defaults.
func (w *Worker) newLoop() *workerLoop {
	l := &workerLoop{w: w, conc: w.Concurrency, poll: w.Poll, grace: w.Grace, name: w.Name, queue: w.Queue,
		stop: make(chan struct{}), taken: map[string]bool{}, specs: &workflow.SpecCache{}}
	if l.conc <= 0 {
		l.conc = 4
	}
	if l.poll <= 0 {
		l.poll = 200 * time.Millisecond
	}
	if l.grace <= 0 {
		l.grace = 30 * time.Second
	}
	if l.name == "" {
		l.name = ProcessName()
	}
	if l.queue == nil {
		l.queue = LocalQueue{DB: w.DB}
		if w.DB.Backend() == migrations.Postgres {
			l.queue = LeaseQueue{DB: w.DB}
		}
	}
	l.claiming, _ = l.queue.(ClaimingQueue)
	if !w.NoSessionReuse {
		l.sessions = w.Sessions
		if l.sessions == nil {
			l.sessions = workflow.NewSessionPool()
		}
	}
	l.done = make(chan Result, l.conc)
	l.jobs = make(chan job)
	return l
}

// list asks the queue for runs to take. ok is false when listing failed
// for good (l.fail is set and the runs in flight were told to stop); a
// transient failure lists nothing and sets the backoff.
func (l *workerLoop) list(ctx context.Context) (list []Candidate, ok bool) {
	// Runs taken and still queued (being claimed, or skipped) are
	// listed again: ask for enough to fill every free slot past them.
	var err error
	if l.claiming != nil {
		list, err = l.claiming.Claim(context.WithoutCancel(ctx), l.conc-l.inflight, takenIDs(l.taken))
	} else {
		list, err = l.queue.Candidates(context.WithoutCancel(ctx), l.conc+len(l.taken))
	}
	switch {
	// (A drain gives up after 8 in a row: about 25 s at the default poll.)
	case err != nil && events.Transient(err) && !(l.w.Drain && l.transient >= 8):
		l.retryAt = time.Now().Add(min(l.poll<<min(l.transient, 6), 5*time.Second))
		l.transient++
		if l.w.Transient != nil {
			l.w.Transient(err)
		}
		return nil, true
	case err != nil:
		l.fail = err
		close(l.stop)
		return nil, false
	}
	l.transient = 0
	return list, true
}

// take starts the runs of list that this worker may take, up to its
// concurrency, and reports whether it started any.
func (l *workerLoop) take(list []Candidate) (startedAny bool) {
	for _, c := range list {
		if l.taken[c.RunID] {
			continue
		}
		if l.inflight >= l.conc {
			// A claim past the free slots is given back at once, not
			// held unstarted until this worker stops.
			if l.claiming != nil {
				l.claiming.Release(c.RunID)
			}
			continue
		}
		resumed := c.State != "queued"
		if resumed && l.claiming == nil && !l.queue.Orphaned(c.RunID) {
			continue
		}
		l.taken[c.RunID] = true
		l.inflight++
		startedAny = true
		if l.w.Started != nil {
			l.w.Started(c.RunID, resumed)
		}
		l.run(job{c: c, resumed: resumed})
	}
	return startedAny
}

// job is a taken run for a runner to execute.
type job struct {
	c       Candidate
	resumed bool
}

// run hands j to an idle runner, or to a new one when none is idle.
func (l *workerLoop) run(j job) {
	if l.idle > 0 {
		l.idle--
		l.jobs <- j // an idle runner is on its way to receive it, if not there yet
		return
	}
	go l.runner(j)
}

// runner executes j, then each run handed to it, until Run returns. Each
// result's send on done (buffered: it never blocks) is followed by a wait
// for the next job, which the loop counts as an idle runner.
func (l *workerLoop) runner(j job) {
	for ok := true; ok; j, ok = <-l.jobs {
		r := l.w.execute(j.c, j.resumed, l.name, l.stop, l.sessions, l.specs)
		if l.claiming != nil {
			l.claiming.Release(j.c.RunID)
		}
		l.done <- r
	}
}

// finished takes in the end of this worker's part in a run.
func (l *workerLoop) finished(r Result) {
	l.inflight--
	if !r.Skipped {
		l.out = append(l.out, r)
	}
	switch r.State {
	case workflow.StateSucceeded, workflow.StateFailed, workflow.StateUncertain, workflow.StateCancelled:
		delete(l.taken, r.RunID) // finished: never listed again
	}
	if l.w.Finished != nil {
		l.w.Finished(r)
	}
}

// stopTaking is the end of Run's context: no new run is taken, and the
// runs in flight stop before their next task.
func (l *workerLoop) stopTaking() {
	l.stopped = true
	if l.fail == nil {
		close(l.stop)
	}
	if l.w.Stopping != nil {
		l.w.Stopping()
	}
}

// execute runs one taken run to the end of this worker's part in it.
func (w *Worker) execute(c Candidate, resumed bool, name string, stop <-chan struct{}, sessions *workflow.SessionPool, specs *workflow.SpecCache) Result {
	runID := c.RunID
	r := w.NewRunner()
	r.DB, r.Stop = w.DB, stop
	if r.Sessions == nil {
		r.Sessions = sessions
	}
	if r.Specs == nil {
		r.Specs = specs
	}
	ctx := context.Background() // a stop never cancels a call in flight
	var res *workflow.Result
	var err error
	if resumed {
		if wr, missing := w.loginsMissing(ctx, runID); missing {
			return wr
		}
		res, err = r.Resume(ctx, runID)
	} else {
		res, err = r.RunQueuedClaimed(ctx, runID, name, c.Created)
	}
	wr := Result{RunID: runID, Resumed: resumed}
	if lost := leaseLost(err, res); lost != nil {
		// Another worker owns the run now: this one's part ends here,
		// whatever the run's own outcome said.
		wr.State, wr.Exit = StateLeaseLost, workflow.ExitStorage
		msg := lost.Error()
		wr.Error = &msg
		return wr
	}
	if err != nil {
		if errors.Is(err, events.ErrRunBusy) || errors.Is(err, workflow.ErrNotQueued) {
			wr.Skipped = true
		}
		wr.State, wr.Exit = "error", workflow.ExitStorage
		var we *workflow.Error
		if errors.As(err, &we) {
			wr.Exit = we.Code
		}
		msg := err.Error()
		wr.Error = &msg
		return wr
	}
	wr.State, wr.Exit = res.State, res.ExitCode
	if res.Err != nil {
		msg := res.Err.Error()
		wr.Error = &msg
	}
	return wr
}

// loginsMissing checks an orphan's logins before it is resumed: a login
// its recorded workflow needs and the database lacks (removed since the
// run started) leaves the run untouched and resumable, nothing sent, this
// worker's result naming the login command (exit 6); this worker does not
// take the run again. (A queued run is failed by RunQueued instead.)
func (w *Worker) loginsMissing(ctx context.Context, runID string) (Result, bool) {
	lr, err := workflow.RunMissingLogins(ctx, w.DB, runID)
	if err == nil && lr == nil {
		return Result{}, false
	}
	wr := Result{RunID: runID, Resumed: true, State: "running", Exit: workflow.ExitRemote}
	if err != nil {
		wr.State, wr.Exit = "error", workflow.ExitStorage
		msg := err.Error()
		wr.Error = &msg
		return wr, true
	}
	msg := lr.Error()
	wr.Error = &msg
	return wr, true
}

// leaseLost is the lease loss that ended a run's part in this worker, from
// the error of RunQueued/Resume or the run's result; nil if none.
func leaseLost(err error, res *workflow.Result) *events.LeaseLostError {
	var le *events.LeaseLostError
	if errors.As(err, &le) {
		return le
	}
	if res != nil && errors.As(res.Err, &le) {
		return le
	}
	return nil
}

// takenIDs lists the runs a worker took and may not claim again.
func takenIDs(taken map[string]bool) []string {
	out := make([]string, 0, len(taken))
	for id := range taken {
		out = append(out, id)
	}
	return out
}
