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

// decide maps the state just entered to the caller's next action.
func decide(to State) Decision {
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
	case FailAmbiguous:
		if to != Uncertain {
			return ""
		}
		switch {
		case before.State == Redispatched:
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
