package workflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// Retry defaults (Temporal's): the first wait 1 s, each next one twice the
// last, capped at 100 times the first.
const (
	defaultRetryInitial = 1.0
	defaultRetryFactor  = 2.0
	defaultRetryCapMul  = 100.0
)

// retryWait is the wait before attempt+1 after attempt failed, under r:
// initial × factor^(attempt-1), capped at maxInterval.
func retryWait(r spec.RetrySpec, attempt int) time.Duration {
	initial := r.InitialIntervalSeconds
	if initial == 0 {
		initial = defaultRetryInitial
	}
	factor := r.BackoffFactor
	if factor == 0 {
		factor = defaultRetryFactor
	}
	capSec := r.MaxIntervalSeconds
	if capSec == 0 {
		capSec = initial * defaultRetryCapMul
	}
	sec := math.Min(initial*math.Pow(factor, float64(attempt-1)), capSec)
	return time.Duration(sec * float64(time.Second))
}

// failureKind is what a failed attempt proves about its tool call; with
// the action's idempotency class it decides whether the action's retry
// policy may follow it (retries; docs/WORKFLOWS.md, "What a retry
// follows").
type failureKind string

const (
	// failNotSent: nothing reached the tool. The connection was refused,
	// DNS or TLS failed before the request, the session could not be
	// opened or listed, the server refused the request before dispatch
	// (401, another 4xx), or the tool was missing or changed. Retried for
	// every class.
	failNotSent failureKind = "not_sent"
	// failMayHaveRun: the request was dispatched and the tool may have
	// run: isError, a JSON-RPC error, a result its schema or the task's
	// contract refuses, a task that failed. Retried only for pure,
	// idempotent and keyed.
	failMayHaveRun failureKind = "may_have_run"
	// failDeterministic: a deterministic failure, local (arguments that
	// violate the tool's inputSchema, a policy refusal, a template error,
	// a bad secret) or a redirect (never followed): nothing ran, and the
	// next attempt would fail the same way. Never retried.
	failDeterministic failureKind = "deterministic"
	// failFinal: the call ended uncertain or cancelled, the run stopped,
	// the database failed, or a replay diverged. Never retried.
	failFinal failureKind = "final"
)

// retries reports whether a failure of kind may be followed by a retry of
// an action of class idem.
func retries(kind failureKind, idem fsm.Idempotency) bool {
	switch kind {
	case failNotSent:
		return true
	case failMayHaveRun:
		return idem.Redispatchable() // pure, idempotent, keyed
	}
	return false
}

// failureBeforeCall classifies a failure before the attempt had a call:
// rendering its arguments, opening or listing the session, finding the
// tool. No tools/call was sent.
func failureBeforeCall(ctx context.Context, err error) failureKind {
	var se *events.Error
	var te *transport.Error
	var cf *callFailure
	switch {
	case ctx.Err() != nil, isDivergence(err), errors.As(err, &se):
		return failFinal
	case errors.Is(err, transport.ErrSecretTooShort):
		return failDeterministic
	case errors.As(err, &te):
		switch te.Kind {
		case transport.KindPolicyDenied:
			return failDeterministic
		case transport.KindCancelled:
			return failFinal
		}
		return failNotSent
	case errors.As(err, &cf) && cf.kind == fsm.ReasonToolMissing:
		return failNotSent
	}
	return failDeterministic // a template error, arguments that are not JSON
}

// failure classifies how call c ended with err (c's machine is terminal).
func (c *call) failure(ctx context.Context, err error) failureKind {
	if c.cancelled || isDivergence(err) || c.m.State != fsm.Failed {
		return failFinal // uncertain or cancelled: the operator's decision
	}
	var te *transport.Error
	isTE := errors.As(err, &te)
	switch {
	case !c.sent:
		// Failed before dispatch: the arguments, the catalog, the policy.
		if isTE && (te.Kind == transport.KindInvalidArguments || te.Kind == transport.KindSchemaTooComplex) {
			return failDeterministic
		}
		return failureBeforeCall(ctx, err)
	case isTE && (te.Kind == transport.KindPolicyDenied || te.Kind == transport.KindHTTPStatus && te.Status >= 300 && te.Status < 400 && !te.Accepted):
		return failDeterministic // a policy refusal, or a redirect (never followed)
	case isTE && c.m.Redispatches == 0 && c.taskID == "" && refusedBeforeDispatch(te):
		return failNotSent
	}
	return failMayHaveRun
}

// refusedBeforeDispatch reports whether the one send of a call failed in
// a way that proves the tool did not run: no byte was sent (connection
// refused, DNS, TLS), or the server refused the HTTP request before it
// accepted it (401 after the credential refresh, another 4xx; a 404 on an
// expired session is ambiguous and never comes here).
func refusedBeforeDispatch(te *transport.Error) bool {
	switch {
	case !te.Sent:
		return true
	case te.Accepted:
		return false
	case te.Kind == transport.KindUnauthorized:
		return true
	}
	return te.Kind == transport.KindHTTPStatus && te.Status >= 400 && te.Status < 500
}

// retryPlan decides whether a failure of attempt that retries allows is
// followed by another attempt, and when: only when the action has a retry
// policy with attempts left, and the wait ends before the task's timeout. The decision
// uses the Runner's clock and jitter, and is recorded, so that resume
// and replay read it instead of deciding again.
func (rn *run) retryPlan(ctx context.Context, t spec.TaskSpec, attempt int, cause error) *vocab.TaskRetryScheduled {
	r := rn.wf.Action(t).Retry
	if r == nil || attempt >= r.MaxAttempts {
		return nil
	}
	wait := retryWait(*r, attempt)
	if rn.r.Jitter != nil {
		wait = rn.r.Jitter(wait)
	}
	at := rn.r.now().Add(wait)
	if d, ok := ctx.Deadline(); ok && at.After(d) {
		return nil // the task's timeoutSeconds ends first
	}
	return &vocab.TaskRetryScheduled{TaskID: t.ID, Attempt: attempt + 1, NotBefore: at.UTC().Format(time.RFC3339Nano), Reason: cause.Error()}
}

// waitRetry waits until the recorded notBefore of the next attempt. A
// replay does not wait: it reproduces the decision, not the time.
func (rn *run) waitRetry(ctx context.Context, next *vocab.TaskRetryScheduled) error {
	if rn.replay {
		return nil
	}
	at, err := time.Parse(time.RFC3339Nano, next.NotBefore)
	if err != nil {
		return fmt.Errorf("recorded notBefore %q: %w", next.NotBefore, err)
	}
	return rn.r.wait(ctx, at.Sub(rn.r.now()))
}

// now is the Runner's clock.
func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// wait blocks for d (nothing when d ≤ 0) or until ctx ends.
func (r *Runner) wait(ctx context.Context, d time.Duration) error {
	if r.Wait != nil {
		return r.Wait(ctx, d)
	}
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
