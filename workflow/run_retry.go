package workflow

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/agentctl/agentctl/projector"
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

// retryPlan decides whether a definitive failure of attempt is followed by
// another attempt, and when: only when the action has a retry policy with
// attempts left, and the wait ends before the task's timeout. The decision
// uses the Runner's clock and jitter, and is recorded, so that resume
// and replay read it instead of deciding again.
func (rn *run) retryPlan(ctx context.Context, t spec.TaskSpec, attempt int, cause error) *projector.TaskRetryScheduled {
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
	return &projector.TaskRetryScheduled{TaskID: t.ID, Attempt: attempt + 1, NotBefore: at.UTC().Format(time.RFC3339Nano), Reason: cause.Error()}
}

// waitRetry waits until the recorded notBefore of the next attempt. A
// replay does not wait: it reproduces the decision, not the time.
func (rn *run) waitRetry(ctx context.Context, next *projector.TaskRetryScheduled) error {
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
