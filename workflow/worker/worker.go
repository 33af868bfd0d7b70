package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/migrations"
)

// Worker executes queued runs, several at once in one process, and resumes
// runs whose process died. Each run gets its own Runner; they all share
// one events.DB, so their appends share commits (group commit).
//
// Which runs are whose: a run is "queued" until a worker claims it
// (Runner.RunQueued); a run is "running" and orphaned when its per-run
// lock (events.DB.LockRun, a kernel lock that dies with its process) can
// be taken: its writer is gone, and the worker resumes it (Runner.Resume:
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
// over: its WorkerRun says StateLeaseLost. With Drain, "nothing left to
// take" does not wait for runs other live workers hold.
//
// Stopping: when the context passed to Run is cancelled (SIGTERM,
// SIGINT), the worker takes no new run and closes Runner.Stop: each run
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
	// NewRunner returns the Runner of one run (with DB set to the worker's).
	NewRunner func() *Runner
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
	// Name identifies the worker in run.started; "" means WorkerName().
	Name string
	// Started and Finished, when set, see each run as it is taken and as
	// its part in this worker ends. They are called from one goroutine.
	Started  func(runID string, resumed bool)
	Finished func(WorkerRun)
	// Stopping, when set, is called once the context has ended and the
	// runs in flight were told to stop before their next task.
	Stopping func()
	// Transient, when set, sees each transient database error met while
	// looking for runs (the look is tried again after a backoff); it is
	// called from Run's goroutine.
	Transient func(error)
}

// WorkerRun is what became of one run a worker took.
type WorkerRun struct {
	RunID   string  `json:"runId"`
	Resumed bool    `json:"resumed"` // an orphan resumed, not a queued run started
	State   string  `json:"state"`   // the run's state when the worker let go of it
	Exit    int     `json:"exitCode"`
	Error   *string `json:"error"`
	// Skipped: another process took the run first; the worker did nothing.
	Skipped bool `json:"skipped,omitempty"`
}

// StateLeaseLost is a WorkerRun's state when the worker lost the run's
// lease (PostgreSQL) and stopped writing it: another worker owns it.
const StateLeaseLost = "lease_lost"

// ErrGraceExpired reports that runs were still in flight when the grace
// period after a stop ended; they are left for a resume.
var ErrGraceExpired = errors.New("workflow: worker grace period expired with runs in flight")

// Run takes and executes runs until the queue is drained (Drain) or ctx
// ends, and returns what became of every run it took.
func (w *Worker) Run(ctx context.Context) ([]WorkerRun, error) {
	conc := w.Concurrency
	if conc <= 0 {
		conc = 4
	}
	poll := w.Poll
	if poll <= 0 {
		poll = 200 * time.Millisecond
	}
	grace := w.Grace
	if grace <= 0 {
		grace = 30 * time.Second
	}
	name := w.Name
	if name == "" {
		name = WorkerName()
	}
	queue := w.Queue
	if queue == nil {
		queue = LocalQueue{DB: w.DB}
		if w.DB.Backend() == migrations.Postgres {
			queue = LeaseQueue{DB: w.DB}
		}
	}
	claiming, _ := queue.(ClaimingQueue)
	stop := make(chan struct{})
	done := make(chan WorkerRun, conc)
	taken := map[string]bool{}
	var out []WorkerRun
	inflight := 0
	ctxDone, stopped := ctx.Done(), false
	var graceOver <-chan time.Time
	var fail error // a storage failure listing the queue: stop taking runs
	// A transient database error (a dropped connection, a restart: see
	// events.Transient) listing the queue is not a failure: the next poll
	// tries again, after a backoff while the errors go on.
	var retryAt time.Time
	transient := 0
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		stopping := stopped || fail != nil
		if !stopping && inflight < conc && !time.Now().Before(retryAt) {
			// Runs taken and still queued (being claimed, or skipped) are
			// listed again: ask for enough to fill every free slot past them.
			var list []Candidate
			var err error
			if claiming != nil {
				list, err = claiming.Claim(context.WithoutCancel(ctx), conc-inflight, takenIDs(taken))
			} else {
				list, err = queue.Candidates(context.WithoutCancel(ctx), conc+len(taken))
			}
			// (A drain gives up after 8 in a row: about 25 s at the default poll.)
			if err != nil && events.Transient(err) && !(w.Drain && transient >= 8) {
				retryAt = time.Now().Add(min(poll<<min(transient, 6), 5*time.Second))
				transient++
				if w.Transient != nil {
					w.Transient(err)
				}
				list = nil
			} else if err != nil {
				fail = err
				close(stop)
				continue
			} else {
				transient = 0
			}
			startedAny := false
			for _, c := range list {
				if inflight >= conc {
					break
				}
				if taken[c.RunID] {
					continue
				}
				resumed := c.State != "queued"
				if resumed && claiming == nil && !queue.Orphaned(c.RunID) {
					continue
				}
				taken[c.RunID] = true
				inflight++
				startedAny = true
				if w.Started != nil {
					w.Started(c.RunID, resumed)
				}
				go func() {
					r := w.execute(c.RunID, resumed, name, stop)
					if claiming != nil {
						claiming.Release(c.RunID)
					}
					done <- r
				}()
			}
			if w.Drain && inflight == 0 && !startedAny && transient == 0 {
				return out, nil
			}
		}
		if stopping && inflight == 0 {
			return out, fail
		}
		tick := ticker.C
		if stopping || inflight >= conc {
			tick = nil
		}
		select {
		case r := <-done:
			inflight--
			if !r.Skipped {
				out = append(out, r)
			}
			switch r.State {
			case StateSucceeded, StateFailed, StateUncertain, StateCancelled:
				delete(taken, r.RunID) // finished: never listed again
			}
			if w.Finished != nil {
				w.Finished(r)
			}
		case <-tick:
		case <-ctxDone:
			ctxDone, stopped = nil, true
			if fail == nil {
				close(stop)
			}
			graceOver = time.After(grace)
			if w.Stopping != nil {
				w.Stopping()
			}
		case <-graceOver:
			return out, fmt.Errorf("%w: %d run(s) left for resume", ErrGraceExpired, inflight)
		}
	}
}

// execute runs one taken run to the end of this worker's part in it.
func (w *Worker) execute(runID string, resumed bool, name string, stop <-chan struct{}) WorkerRun {
	r := w.NewRunner()
	r.DB, r.Stop = w.DB, stop
	ctx := context.Background() // a stop never cancels a call in flight
	var res *Result
	var err error
	if resumed {
		res, err = r.Resume(ctx, runID)
	} else {
		res, err = r.RunQueued(ctx, runID, name)
	}
	wr := WorkerRun{RunID: runID, Resumed: resumed}
	if lost := leaseLost(err, res); lost != nil {
		// Another worker owns the run now: this one's part ends here,
		// whatever the run's own outcome said.
		wr.State, wr.Exit = StateLeaseLost, ExitStorage
		msg := lost.Error()
		wr.Error = &msg
		return wr
	}
	if err != nil {
		if errors.Is(err, events.ErrRunBusy) || errors.Is(err, ErrNotQueued) {
			wr.Skipped = true
		}
		wr.State, wr.Exit = "error", ExitStorage
		var we *Error
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

// leaseLost is the lease loss that ended a run's part in this worker, from
// the error of RunQueued/Resume or the run's result; nil if none.
func leaseLost(err error, res *Result) *events.LeaseLostError {
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
