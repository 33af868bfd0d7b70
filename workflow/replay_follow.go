package workflow

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/workflow/spec"
)

// A replay reproduces its source's final outcome, recoveries included. A
// source interrupted (Ctrl-C, a crash), reconciled by an operator and
// resumed continued its tasks after their first ending: a verdict on an
// uncertain call (call.reconciled), then, after run.resumed, the attempt
// finished again with the reconciled result (applied) or a new attempt
// (not applied; a call cancelled before anything ran; resume
// --retry-failed). A replay is never interrupted, reconciled or resumed:
// where its task attempt ends as the source's first did, it records the
// same verdict on its own call and continues as the resume did, so that
// it ends as the source ended, and never suggests settling a call that is
// already settled.

// follow continues task t after its attempt n ended with fail and no retry
// was scheduled, as its source continued it (see above): more says a new
// attempt was made, whose outcome (and retry schedule) it returns; else
// the task ends with out and fail.
func (rn *run) follow(ctx context.Context, t spec.TaskSpec, n int, fail *Error) (out any, _ *Error, next *vocab.TaskRetryScheduled, more bool) {
	d, ok := rn.r.Dialer.(ReplaySource)
	if !ok || fail.Code == ExitStorage {
		return nil, fail, nil, false
	}
	a := d.SourceAttempt(t.ID, n)
	switch {
	case a.Verdict != nil && a.Verdict.Status == ReconcileApplied && a.Settled:
		if err := rn.replayVerdict(a.Verdict); err != nil {
			return nil, rn.followFail(t, err), nil, false
		}
		out, err := decodeOutput(a.Verdict.Result)
		if err != nil {
			out, fail := rn.finishAttempt(t, n, nil, ExitFailed, fmt.Errorf("reconciled result: %w", err), nil)
			return out, fail, nil, false
		}
		out, code, err := rn.checkContract(t, out)
		out, fail := rn.finishAttempt(t, n, out, code, err, nil)
		return out, fail, nil, false
	case !a.NextStarted:
		return nil, fail, nil, false // the source ended here too
	case a.Verdict != nil:
		if err := rn.replayVerdict(a.Verdict); err != nil {
			return nil, rn.followFail(t, err), nil, false
		}
	}
	out, fail, next = rn.task(ctx, t, n+1, nil)
	return out, fail, next, true
}

// replayVerdict records the source's verdict on the lane's latest call
// (call.reconciled and its transition), as `effects reconcile` recorded
// it on the source's call.
func (rn *run) replayVerdict(v *vocab.CallReconciled) error {
	c := rn.replayCall
	if c == nil || c.m.State != fsm.Uncertain {
		got := "no call"
		if c != nil {
			got = "a call " + string(c.m.State)
		}
		return &DivergenceError{SourceRunID: rn.sourceRunID(), TaskID: v.EffectID, Field: "reconcile",
			Recorded: "an uncertain call reconciled " + v.Status, Replayed: got}
	}
	trigger := fsm.ReconcileApplied
	if v.Status == ReconcileNotApplied {
		trigger = fsm.ReconcileNotApplied
	}
	rec := *v
	rec.EffectID = c.effectID
	rn.later(events.Record{Stream: c.stream(), Type: vocab.TypeCallReconciled, Payload: rec})
	_, err := c.fire(trigger, v.Reason, false)
	return err
}

// followFail ends a task whose recorded recovery the replay could not
// reproduce: a divergence (exit 4), or a storage failure.
func (rn *run) followFail(t spec.TaskSpec, err error) *Error {
	if exitFor(err) == ExitStorage {
		return rn.storageFail(err)
	}
	return &Error{RunID: rn.id, Code: ExitFailed, Err: fmt.Errorf("task %s: %w", t.ID, err)}
}

// sourceRunID is the run a replay answers from ("" outside a replay).
func (rn *run) sourceRunID() string {
	if d, ok := rn.r.Dialer.(ReplaySource); ok {
		return d.SourceRunID()
	}
	return ""
}
