package workflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/workflow/spec"
)

// ReasonInterrupted is the reason of the FailAmbiguous transition resume
// fires for a call that was sent (or about to be) when the process ended:
// nobody knows whether the request reached the server.
const ReasonInterrupted = "interrupted: process ended after dispatch"

// Resume continues runID from its log after the process that ran it ended
// (a crash, a kill) or after an operator reconciled the call that left it
// uncertain. It appends to the same run: a run.resumed event, then the
// rest of the run. Nothing is taken from memory:
//
//   - the workflow and inputs come from run.created;
//   - a task whose attempt succeeded is not run again: its recorded output
//     is used;
//   - a call that was prepared but never dispatched is dispatched (on a new
//     session, after checking the tool's schema digest);
//   - a call dispatched with no outcome in the log is an ambiguous failure
//     (ReasonInterrupted): the state machine, rebuilt from the call's
//     transitions, decides between the one redispatch its class and budget
//     allow and uncertain;
//   - a call whose result is in the log is completed from that result,
//     never sent again;
//   - a call reconciled as applied completes its task with the reconciled
//     result; one reconciled as not applied makes the task start a new
//     attempt (a new call identity and idempotency key).
//
// A finished run may be resumed when it ended uncertain or cancelled and
// none of its calls is still uncertain (reconcile settles them; a task
// cancelled before anything was sent gets a new attempt), or when it ended
// failed and ResumeOptions.RetryFailed is set; otherwise, and for replays,
// Resume refuses with an *Error of code ExitInvalid and records nothing.
// A run whose chain does not verify is refused first (events.RequireIntact,
// a storage error naming the first bad seq). As with Run, a non-nil error
// means nothing was recorded.
func (r *Runner) Resume(ctx context.Context, runID string) (*Result, error) {
	return r.ResumeWith(ctx, runID, ResumeOptions{})
}

// ResumeOptions widen what Resume picks up again.
type ResumeOptions struct {
	// RetryFailed gives every task whose last attempt ended failed (a
	// definitive failure) a new attempt, and lets a run that finished
	// failed be resumed. Succeeded tasks keep their recorded output;
	// uncertain calls still need a reconcile first.
	RetryFailed bool
}

// ResumeWith is Resume with options.
func (r *Runner) ResumeWith(ctx context.Context, runID string, opts ResumeOptions) (*Result, error) {
	// One writer per run: a second resume, or a resume of a run that is
	// still going, is refused before it reads anything.
	unlock, err := r.DB.LockRun(runID)
	if errors.Is(err, events.ErrRunBusy) {
		return nil, &Error{RunID: runID, Code: ExitInvalid, Err: fmt.Errorf("resume: %w (the run, or another resume of it, is still going)", err)}
	}
	if err != nil {
		return nil, err
	}
	defer unlock()
	// The log decides what is sent again: a run whose chain does not
	// recompute (an edited class, a deleted result) is not acted on.
	if err := r.DB.RequireIntact(ctx, runID); err != nil && !errors.Is(err, events.ErrNoRun) {
		return nil, err
	}
	// A stdio server this run started and that outlived its writer is
	// ended before anything is sent again (pid + start time must match).
	if _, err := killRecordedServers(ctx, r.DB, runID); err != nil {
		return nil, err
	}
	l, err := loadRunLog(ctx, r.DB, runID)
	if err != nil {
		if errors.Is(err, events.ErrNoRun) {
			return nil, &Error{Code: ExitInvalid, Err: fmt.Errorf("resume %s: %w", runID, err)}
		}
		return nil, err
	}
	refuse := func(format string, args ...any) (*Result, error) {
		return nil, &Error{RunID: runID, Code: ExitInvalid, Err: fmt.Errorf("resume %s: "+format, append([]any{runID}, args...)...)}
	}
	if l.created.Mode == "replay" {
		return refuse("a replay cannot be resumed; replay the source run again")
	}
	if l.created.Mode == ModeCheck {
		return refuse("a check (check --remote) cannot be resumed; run agentctl check --remote %s again", l.created.File)
	}
	previous := "running"
	if l.finished != nil {
		if err := l.resumable(opts.RetryFailed); err != nil {
			return refuse("%w", err)
		}
		previous = l.finished.State
	}
	wf, err := spec.Parse(l.created.File, []byte(l.created.Source))
	if err != nil {
		return refuse("recorded workflow: %w", err)
	}
	getenv := r.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	if ds := wf.UnsetSecrets(getenv); len(ds) > 0 {
		return refuse("%w", ds)
	}
	rn := newRun(r, wf, runID, l.created.Inputs)
	rn.log = l
	rn.gens = maps.Clone(l.gens)
	rn.protos = maps.Clone(l.protos)
	l.retryFailed = opts.RetryFailed
	command := "resume"
	if opts.RetryFailed {
		command = "resume --retry-failed"
	}
	resumed := vocab.RunResumed{FromSeq: l.lastSeq, PreviousState: previous, Command: command}
	if err := rn.appendAfter(l.lastSeq, events.Record{Stream: "run", Type: vocab.TypeRunResumed, Payload: resumed}); err != nil {
		if errors.Is(err, events.ErrConflict) {
			return refuse("run %s changed while it was being read (is another resume running?): %w", runID, err)
		}
		return nil, err
	}
	if l.created.Command == "mcp tools" {
		// A listing has no task to run: the session lists again (pure).
		remote := "remote"
		for name := range l.created.Servers { // a listing records its one remote
			remote = name
		}
		res, _, err := rn.listTools(ctx, remote, rn.nextAttempt(listToolsTask))
		return res, err
	}
	return rn.execute(ctx), nil
}

// resumable says why a finished run may not be resumed, or nil. A run
// that ended uncertain or cancelled resumes once no call of it is still
// uncertain (reconciled applied: the recorded result is the task's output;
// not applied: a new attempt); one that ended failed resumes only with
// retryFailed; a succeeded one never.
func (l *runLog) resumable(retryFailed bool) error {
	switch l.finished.State {
	case StateUncertain, StateCancelled:
	case StateFailed:
		if !retryFailed {
			return fmt.Errorf("run finished failed; to give its failed tasks a new attempt: agentctl resume %s --retry-failed", l.runID)
		}
	default:
		return fmt.Errorf("run finished %s; there is nothing to resume", l.finished.State)
	}
	return l.unreconciled()
}

// unreconciled names the first call of the run still uncertain, with the
// commands that settle it, or returns nil.
func (l *runLog) unreconciled() error {
	for _, as := range l.attempts {
		a := as[len(as)-1]
		if a.call != nil && a.call.m.State == fsm.Uncertain {
			return fmt.Errorf("call %s of task %s is still uncertain; check the server, then reconcile it first:\n%s",
				a.call.prep.EffectID, a.started.TaskID, ReconcileHint(a.call.prep.EffectID))
		}
	}
	return nil
}

// ReconcileHint is the two commands that settle an uncertain call, one a
// line, as an operator types them (ReconcileCommands without the resume).
func ReconcileHint(effectID string) string {
	c := ReconcileCommands("", effectID)
	return "  " + c[0] + "\n  " + c[1]
}

// runTask runs a task in a fresh run, or decides from the log what is left
// of it in a resumed one; then it makes the retries the action's policy
// allows.
func (rn *run) runTask(ctx context.Context, t spec.TaskSpec) (any, *Error) {
	if t.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = withTaskTimeout(ctx, t.ID, t.TimeoutSeconds)
		defer cancel()
	}
	out, fail, next := rn.decideTask(ctx, t)
	attempt := 1 // a replay's first (a replay is a fresh run)
	for {
		for next != nil {
			if err := rn.waitRetry(ctx, next); err != nil {
				// The wait is recorded: a resume waits what is left of it.
				return nil, &Error{RunID: rn.id, Code: ExitCancelled, Err: fmt.Errorf("task %s: waiting to retry (attempt %d not before %s): %w", t.ID, next.Attempt, next.NotBefore, err)}
			}
			attempt = next.Attempt
			out, fail, next = rn.task(ctx, t, next.Attempt, nil)
		}
		if fail == nil || !rn.replay {
			return out, fail
		}
		// A replay continues as its source's reconcile and resume did.
		var more bool
		if out, fail, next, more = rn.follow(ctx, t, attempt, fail); !more {
			return out, fail
		}
		attempt++
	}
}

// decideTask is the first step of runTask: a new attempt, the interrupted
// one, or what the log says of the task.
func (rn *run) decideTask(ctx context.Context, t spec.TaskSpec) (any, *Error, *vocab.TaskRetryScheduled) {
	var a *loggedAttempt
	if rn.log != nil {
		a = rn.log.last(t.ID)
	}
	switch {
	case a == nil:
		return rn.task(ctx, t, 1, nil)
	case a.finished == nil:
		return rn.task(ctx, t, a.started.Attempt, a)
	case a.finished.State == StateSucceeded:
		out, err := decodeOutput(a.finished.Output)
		if err != nil {
			return nil, &Error{RunID: rn.id, Code: ExitStorage, Err: fmt.Errorf("task %s: recorded output: %w", t.ID, err)}, nil
		}
		return out, nil, nil
	case a.call != nil && a.call.reconciled != nil && a.call.m.State == fsm.Succeeded:
		out, err := decodeOutput(a.call.reconciled.Result)
		if err != nil {
			out, fail := rn.finishAttempt(t, a.started.Attempt, nil, ExitFailed, fmt.Errorf("reconciled result: %w", err), nil)
			return out, fail, nil
		}
		out, code, err := rn.checkContract(t, out)
		out, fail := rn.finishAttempt(t, a.started.Attempt, out, code, err, nil)
		return out, fail, nil
	case a.call != nil && a.call.reconciled != nil && a.call.m.State == fsm.Failed:
		return rn.task(ctx, t, a.started.Attempt+1, nil)
	case a.retry != nil:
		// The attempt failed and its retry was scheduled: wait what is
		// left of the recorded wait, then make it.
		return nil, nil, a.retry
	case a.finished.State == StateUncertain && a.call != nil:
		return nil, &Error{RunID: rn.id, Code: ExitUncertain, Err: fmt.Errorf("task %s: %w", t.ID, rn.uncertainOf(a.call, nil))}, nil
	case a.finished.State == StateCancelled && (a.call == nil || a.call.m.State == fsm.Cancelled):
		// Stopped before anything was sent: the resumed run makes the attempt again.
		return rn.task(ctx, t, a.started.Attempt+1, nil)
	case a.finished.State == StateFailed && rn.log.retryFailed:
		return rn.task(ctx, t, a.started.Attempt+1, nil)
	}
	code := ExitFailed
	if a.finished.State == StateCancelled {
		code = ExitCancelled
	}
	return nil, &Error{RunID: rn.id, Code: code, Err: fmt.Errorf("task %s: attempt %d ended %s: %s", t.ID, a.started.Attempt, a.finished.State, a.finished.Error)}, nil
}
