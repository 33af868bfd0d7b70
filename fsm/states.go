package fsm

import (
	"fmt"
	"strings"
)

// State is where one call stands; it is persisted as the from/to of every
// call.transition event, so its values are part of the log format.
type State string

// The states of a call. Values are stored in the event log: never rename one.
const (
	// Prepared: intent recorded, arguments validated, nothing sent yet.
	Prepared State = "prepared"
	// Dispatched: the tools/call request has been (or is being) sent once.
	Dispatched State = "dispatched"
	// Reconnecting: an ambiguous failure on a redispatchable call; a new
	// session is being opened before the one allowed resend.
	Reconnecting State = "reconnecting"
	// Redispatched: the same params were sent again under a new JSON-RPC id.
	Redispatched State = "redispatched"
	// Succeeded: a complete, validated result is in hand.
	Succeeded State = "succeeded"
	// Failed: the call did not execute, or it executed and failed for sure.
	Failed State = "failed"
	// Uncertain: the call may have executed and may not be sent again; an
	// operator must decide (see ReconcileApplied, ReconcileNotApplied).
	Uncertain State = "uncertain"
	// Cancelled: the user cancelled before any request could have run, or
	// the server confirmed a cancelled MCP task before it completed.
	Cancelled State = "cancelled"

	// Accepted: the server answered a task-augmented tools/call with a
	// CreateTaskResult, and its taskId is on disk. From here on the call is
	// never sent again because of a lost stream, a timeout or a crash: the
	// caller asks about the same task instead.
	Accepted State = "accepted"
	// Polling: the caller is asking tasks/get about the recorded task (the
	// server reported it working, or a poll had to be repeated).
	Polling State = "polling"
	// InputRequired: for an MCP task, the task wants input (elicitation)
	// that agentctl does not offer; the caller sends tasks/cancel and the
	// call ends uncertain. For a 2026-07-28 call (entered by InputRequested,
	// Call.InputRounds > 0), the server answered an InputRequiredResult: the
	// tool has not run, and the caller answers and re-issues the request.
	InputRequired State = "input_required"
	// Cancelling: the user cancelled while a task was running; tasks/cancel
	// is being sent and only the server's confirmation makes it cancelled.
	Cancelling State = "cancelling"
)

// states lists every State in a fixed order, for configuration and tests.
var states = []State{
	Prepared, Dispatched, Reconnecting, Redispatched, Succeeded, Failed, Uncertain, Cancelled,
	Accepted, Polling, InputRequired, Cancelling,
}

// Terminal reports whether the run loop is done with a call in this state,
// so a task attempt can finish; only an operator reconcile leaves Uncertain.
// The MCP task states (accepted, polling, input_required, cancelling) are
// not terminal: the task lives on the server and the caller keeps asking.
func (s State) Terminal() bool {
	switch s {
	case Succeeded, Failed, Uncertain, Cancelled:
		return true
	}
	return false
}

// Idempotency is the author's declaration of what sending a call twice does;
// it alone decides whether an ambiguous failure may be redispatched.
type Idempotency string

// The idempotency classes an action may declare (docs/ARCHITECTURE.md).
const (
	// Pure: no side effects at all; resending is always harmless.
	Pure Idempotency = "pure"
	// Idempotent: repeating the call leaves the same effect as doing it once.
	Idempotent Idempotency = "idempotent"
	// Keyed: the server deduplicates on params._meta idempotency key.
	Keyed Idempotency = "keyed"
	// AtMostOnce: a second execution would be harmful; never resent.
	AtMostOnce Idempotency = "at_most_once"
	// Unknown: nothing was declared (the default); treated as AtMostOnce.
	Unknown Idempotency = "unknown"
)

// idempotencies lists every class in declaration order, for messages and tests.
var idempotencies = []Idempotency{Pure, Idempotent, Keyed, AtMostOnce, Unknown}

// ParseIdempotency turns a workflow's `idempotency:` value into a class so
// that a typo fails validation instead of silently meaning "unknown";
// the empty string is the documented default, Unknown.
func ParseIdempotency(s string) (Idempotency, error) {
	if s == "" {
		return Unknown, nil
	}
	for _, i := range idempotencies {
		if string(i) == s {
			return i, nil
		}
	}
	allowed := make([]string, len(idempotencies))
	for n, i := range idempotencies {
		allowed[n] = string(i)
	}
	return "", fmt.Errorf("fsm: invalid idempotency %q: want one of %s", s, strings.Join(allowed, ", "))
}

// Redispatchable reports whether the class allows one resend after an
// ambiguous failure: only when running twice cannot do harm.
func (i Idempotency) Redispatchable() bool {
	switch i {
	case Pure, Idempotent, Keyed:
		return true
	}
	return false
}

// Trigger is an input to the machine: the caller's decision or an observed
// outcome. It is persisted in call.transition, so values are log format.
type Trigger string

// The triggers. Each comment names the legal source states and targets.
const (
	// Dispatch: prepared → dispatched; fire it, persist, and only then send.
	Dispatch Trigger = "dispatch"
	// Succeed: dispatched|redispatched|accepted|polling|cancelling → succeeded;
	// the result (of tools/call, or of tasks/result for a task) was validated.
	Succeed Trigger = "succeed"
	// FailDefinitive: prepared|dispatched|reconnecting|redispatched|accepted|
	// polling|cancelling → failed; JSON-RPC error, isError, invalid arguments
	// or output, 4xx, version mismatch; for a task, status failed or a
	// tasks/result that is an error or violates the output schema.
	FailDefinitive Trigger = "fail_definitive"
	// FailAmbiguous: timeout, transport loss after send, session expiry,
	// malformed response. dispatched → reconnecting when the class is
	// redispatchable and the budget is unspent, else → uncertain;
	// redispatched → uncertain (a second failure is final).
	// accepted|polling → polling: a tasks/get or tasks/result that failed
	// this way (or a crash) is answered by polling the same task again,
	// for every class; nothing is resent. input_required → uncertain;
	// cancelling → uncertain (the tasks/cancel went unconfirmed).
	FailAmbiguous Trigger = "fail_ambiguous"
	// FailPossiblyExecuted: 5xx or cancellation after send;
	// dispatched|redispatched → uncertain, never redispatched. For a task
	// (accepted|polling|input_required|cancelling → uncertain): the caller
	// gave up learning the task's fate, or tasks/cancel was refused.
	FailPossiblyExecuted Trigger = "fail_possibly_executed"
	// Reconnected: reconnecting → redispatched; a new session is initialized,
	// tools/list refreshed and the tool's schema digest is unchanged.
	Reconnected Trigger = "reconnected"
	// SchemaChanged: reconnecting → failed; the digest differs, nothing resent.
	SchemaChanged Trigger = "schema_changed"
	// ToolMissing: reconnecting → failed; the tool is gone, nothing resent.
	ToolMissing Trigger = "tool_missing"
	// ReconnectFailed: reconnecting → uncertain; no new session, nothing
	// resent, and the first request may have run.
	ReconnectFailed Trigger = "reconnect_failed"
	// Cancel: user cancel. prepared → cancelled (nothing was sent);
	// dispatched|reconnecting|redispatched|input_required → uncertain (a
	// request may have run); accepted|polling → cancelling (send tasks/cancel).
	Cancel Trigger = "cancel"
	// ReconcileApplied: uncertain → succeeded; an operator confirmed the effect.
	ReconcileApplied Trigger = "reconcile_applied"
	// ReconcileNotApplied: uncertain → failed; an operator confirmed no effect.
	ReconcileNotApplied Trigger = "reconcile_not_applied"

	// TaskAccepted: dispatched|redispatched → accepted; the answer to a
	// task-augmented tools/call was a CreateTaskResult, persisted with its
	// taskId (and the session needed to reach it) in the same commit.
	TaskAccepted Trigger = "task_accepted"
	// TaskWorking: accepted → polling; tasks/get answered working. Identical
	// later statuses are evidence for the caller to fold, not triggers.
	TaskWorking Trigger = "task_working"
	// TaskInputRequired: accepted|polling → input_required; the task wants
	// input agentctl cannot give (tasks/get said input_required, or
	// tasks/result asked for an elicitation).
	TaskInputRequired Trigger = "task_input_required"
	// TaskCancelled: the server reports the task cancelled. cancelling →
	// cancelled (our tasks/cancel was confirmed); accepted|polling → failed
	// (the server cancelled it on its own: no result will come);
	// input_required → uncertain.
	TaskCancelled Trigger = "task_cancelled"
	// TaskLost: tasks/get or tasks/result says the task is unknown or
	// expired, or the session it lives in is gone (404). The task may have
	// run, so it is ambiguous like FailAmbiguous in dispatched: accepted|
	// polling → reconnecting when the class allows a redispatch and the
	// budget is unspent, else → uncertain ("task_lost"); input_required|
	// cancelling → uncertain.
	TaskLost Trigger = "task_lost"
	// URLElicitationRequired: dispatched|redispatched → uncertain; the server
	// answered JSON-RPC error -32042: a person must visit a URL first.
	URLElicitationRequired Trigger = "url_elicitation_required"

	// InputRequested: dispatched|redispatched → input_required; a
	// 2026-07-28 server answered an InputRequiredResult (MRTR): the tool has
	// not run. After MaxInputRounds rounds → failed ("input_rounds_exceeded").
	InputRequested Trigger = "input_requested"
	// InputAnswered: input_required → redispatched, for a call that entered
	// by InputRequested: the request is re-issued (a new id) with the
	// answers and the exact requestState. Legal for every class and never
	// counted against the redispatch budget.
	InputAnswered Trigger = "input_answered"
)

// triggers lists every Trigger in a fixed order, for configuration and tests.
var triggers = []Trigger{
	Dispatch, Succeed, FailDefinitive, FailAmbiguous, FailPossiblyExecuted,
	Reconnected, SchemaChanged, ToolMissing, ReconnectFailed, Cancel,
	ReconcileApplied, ReconcileNotApplied,
	TaskAccepted, TaskWorking, TaskInputRequired, TaskCancelled, TaskLost, URLElicitationRequired,
	InputRequested, InputAnswered,
}

// Decision is what the caller must do after persisting a Transition, like
// raft's Ready: the machine decides, the caller performs the I/O.
type Decision string

// The decisions Fire returns.
const (
	// DecideSend: send the tools/call request now (after the transition is durable).
	DecideSend Decision = "send"
	// DecideReconnect: open a new session, refresh tools/list, compare the
	// schema digest, then fire Reconnected, SchemaChanged, ToolMissing or
	// ReconnectFailed.
	DecideReconnect Decision = "reconnect"
	// DecideResend: send the same params again under a new JSON-RPC id.
	DecideResend Decision = "resend"
	// DecideNone: send nothing; if the new state is Terminal the call is over,
	// otherwise wait for the outcome of the request already in flight.
	DecideNone Decision = "none"
	// DecidePoll: ask tasks/get about the recorded task (after its
	// pollInterval), then tasks/result once it is completed or failed. This
	// is never a resend: it is legal for every class.
	DecidePoll Decision = "poll"
	// DecideAnswerInput: answer the input requests of an InputRequiredResult
	// (2026-07-28), then fire InputAnswered (or FailDefinitive when they
	// cannot be answered, or Cancel).
	DecideAnswerInput Decision = "answer_input"
	// DecideCancelTask: send tasks/cancel for the recorded task (best
	// effort, recorded), then fire TaskCancelled if the server confirms the
	// task cancelled, Succeed or FailDefinitive if it had already finished
	// (cancelling only), else FailPossiblyExecuted.
	DecideCancelTask Decision = "cancel_task"
)

// Reason codes the machine writes into Transition.Reason when it, not the
// caller, picked the outcome. A caller's detail follows after ": ".
const (
	// ReasonNotRedispatchable prefixes the class that forbade a resend,
	// e.g. "not_redispatchable:at_most_once".
	ReasonNotRedispatchable = "not_redispatchable"
	// ReasonBudgetSpent: the call was already redispatched once.
	ReasonBudgetSpent = "redispatch_budget_spent"
	// ReasonSecondFailure: the redispatched request failed as well; final.
	ReasonSecondFailure = "second_failure"
	// ReasonPossiblyExecuted: 5xx or similar; it may have run, never resent.
	ReasonPossiblyExecuted = "possibly_executed"
	// ReasonSchemaChanged: the tool's schema digest changed across sessions.
	ReasonSchemaChanged = "schema_changed"
	// ReasonToolMissing: the tool is absent from the refreshed tools/list.
	ReasonToolMissing = "tool_missing"
	// ReasonReconnectFailed: no new session could be opened.
	ReasonReconnectFailed = "reconnect_failed"
	// ReasonCancelledBeforeSend: cancelled while nothing had been sent.
	ReasonCancelledBeforeSend = "cancelled_before_send"
	// ReasonCancelledAfterSend: cancelled after a request may have run.
	ReasonCancelledAfterSend = "cancelled_after_send"
	// ReasonReconcileApplied: an operator confirmed the effect happened.
	ReasonReconcileApplied = "reconcile_applied"
	// ReasonReconcileNotApplied: an operator confirmed it did not happen.
	ReasonReconcileNotApplied = "reconcile_not_applied"
	// ReasonRepoll: a task poll failed or was interrupted; the same task is
	// asked about again (not a resend).
	ReasonRepoll = "repoll"
	// ReasonTaskLost: the server no longer knows the task (or its session),
	// and the call may not be redispatched.
	ReasonTaskLost = "task_lost"
	// ReasonInputRequired: the task asked for input agentctl does not offer.
	ReasonInputRequired = "input_required"
	// ReasonTaskCancelledByServer: the task was cancelled without our asking.
	ReasonTaskCancelledByServer = "task_cancelled_by_server"
	// ReasonTaskCancelled: the server confirmed our tasks/cancel.
	ReasonTaskCancelled = "task_cancelled"
	// ReasonURLElicitationRequired: JSON-RPC error -32042; a person must act.
	ReasonURLElicitationRequired = "url_elicitation_required"
	// ReasonInputRoundsExceeded: the server kept asking for input past
	// MaxInputRounds; the tool has not run.
	ReasonInputRoundsExceeded = "input_rounds_exceeded"
)
