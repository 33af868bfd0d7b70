package fsm

import (
	"context"
	"strings"
)

// RedispatchBudget is how many times one call may be sent again after an
// ambiguous failure (docs/ARCHITECTURE.md, "The call state machine": at most once). It is counted in
// Call.Redispatches, which Rebuild reads back from the log, so the budget
// survives a process restart.
const RedispatchBudget = 1

// The guards and entry actions below are top-level functions, not closures,
// because stateless labels the graph with their names. They read only the
// *Call passed as the trigger argument: no clock, no I/O.

// callArg returns the *Call that Fire passes with every trigger.
func callArg(args []any) *Call {
	if len(args) == 0 {
		return nil
	}
	c, _ := args[0].(*Call)
	return c
}

// mayRedispatch is the whole resend rule: a redispatchable class and an
// unspent budget.
func mayRedispatch(c *Call) bool {
	return c != nil && c.Idempotency.Redispatchable() &&
		c.Redispatches >= 0 && c.Redispatches < RedispatchBudget
}

// redispatchAllowed guards dispatched → reconnecting and reconnecting →
// redispatched.
func redispatchAllowed(_ context.Context, args ...any) bool {
	return mayRedispatch(callArg(args))
}

// redispatchRefused is the exact complement of redispatchAllowed, so that
// FailAmbiguous in dispatched always has exactly one target.
func redispatchRefused(_ context.Context, args ...any) bool {
	return !mayRedispatch(callArg(args))
}

// countRedispatch spends the budget on entry to redispatched. It mutates
// only the in-memory Call value.
func countRedispatch(_ context.Context, args ...any) error {
	if c := callArg(args); c != nil {
		c.Redispatches++
	}
	return nil
}

// MaxInputRounds bounds the input-required results (2026-07-28 MRTR) one
// call answers: the next one fails it definitively (the tool has not run).
const MaxInputRounds = 8

// inputRoundLeft guards dispatched|redispatched → input_required.
func inputRoundLeft(_ context.Context, args ...any) bool {
	c := callArg(args)
	return c != nil && c.InputRounds < MaxInputRounds
}

// inputRoundsSpent is the exact complement of inputRoundLeft.
func inputRoundsSpent(ctx context.Context, args ...any) bool {
	return !inputRoundLeft(ctx, args...)
}

// countInputRound counts an input-required result on entry to
// input_required from InputRequested.
func countInputRound(_ context.Context, args ...any) error {
	if c := callArg(args); c != nil {
		c.InputRounds++
		c.ByInputResult = true
	}
	return nil
}

// markTaskInput records that an MCP task, not an input-required result,
// put the call in input_required.
func markTaskInput(_ context.Context, args ...any) error {
	if c := callArg(args); c != nil {
		c.ByInputResult = false
	}
	return nil
}

// mrtrInput: the call is in input_required because of an input-required
// result (2026-07-28), not an MCP task's status.
func mrtrInput(_ context.Context, args ...any) bool {
	c := callArg(args)
	return c != nil && c.ByInputResult
}

// taskInput is the exact complement of mrtrInput: an MCP task wants input.
func taskInput(ctx context.Context, args ...any) bool {
	return !mrtrInput(ctx, args...)
}

// decide maps the call just moved to the caller's next action.
func decide(c Call) Decision {
	to := c.State
	if to == InputRequired && c.ByInputResult {
		return DecideAnswerInput
	}
	switch to {
	case Dispatched:
		return DecideSend
	case Reconnecting:
		return DecideReconnect
	case Redispatched:
		return DecideResend
	case Accepted, Polling:
		return DecidePoll
	case InputRequired, Cancelling:
		return DecideCancelTask
	}
	return DecideNone
}

// reasonCode is the machine's own reason for a transition, or "" when the
// caller's reason stands alone.
func reasonCode(before Call, t Trigger, to State) string {
	if code, ok := taskReasonCode(before, t, to); ok {
		return code
	}
	switch t {
	case InputRequested:
		if to == Failed {
			return ReasonInputRoundsExceeded
		}
		return ""
	case FailAmbiguous:
		if to != Uncertain {
			return ""
		}
		switch {
		case before.State == Redispatched && before.Redispatches > 0:
			return ReasonSecondFailure
		case !before.Idempotency.Redispatchable():
			return ReasonNotRedispatchable + ":" + string(before.Idempotency)
		default:
			return ReasonBudgetSpent
		}
	case FailPossiblyExecuted:
		return ReasonPossiblyExecuted
	case SchemaChanged:
		return ReasonSchemaChanged
	case ToolMissing:
		return ReasonToolMissing
	case ReconnectFailed:
		return ReasonReconnectFailed
	case Cancel:
		if to == Cancelled {
			return ReasonCancelledBeforeSend
		}
		return ReasonCancelledAfterSend
	case ReconcileApplied:
		return ReasonReconcileApplied
	case ReconcileNotApplied:
		return ReasonReconcileNotApplied
	}
	return ""
}

// taskReasonCode is reasonCode for the MCP task states and triggers; ok is
// false when the general rules apply.
func taskReasonCode(before Call, t Trigger, to State) (string, bool) {
	switch before.State {
	case InputRequired:
		if before.ByInputResult { // an input-required result: general rules
			return "", t != Cancel
		}
		if t == InputAnswered { // 2026-07-28: tasks/update sent, polling goes on
			return "", true
		}
		return ReasonInputRequired, true
	case Cancelling:
		switch to {
		case Cancelled:
			return ReasonTaskCancelled, true
		case Uncertain:
			if t == TaskLost {
				return ReasonTaskLost, true
			}
			return ReasonCancelledAfterSend, true
		}
		return "", true
	case Accepted, Polling:
		switch t {
		case FailAmbiguous:
			return ReasonRepoll, true
		case TaskLost: // to reconnecting or uncertain, the loss is the reason
			return ReasonTaskLost, true
		case TaskCancelled:
			return ReasonTaskCancelledByServer, true
		case Cancel, TaskInputRequired:
			return "", true
		}
	}
	if t == URLElicitationRequired {
		return ReasonURLElicitationRequired, true
	}
	return "", false
}

// joinReason puts the machine's code first and the caller's detail after
// it. It is idempotent, so replaying a persisted reason does not stack codes.
func joinReason(code, detail string) string {
	switch {
	case code == "":
		return detail
	case detail == "", detail == code, strings.HasPrefix(detail, code+": "):
		if detail == "" {
			return code
		}
		return detail
	}
	return code + ": " + detail
}
