// Package fsm is the per-call state machine of agentctl: it decides, for one
// tools/call, whether the request may be sent, sent again, or must stop.
//
// The package is pure, in the style of etcd raft's RawNode: it does no I/O,
// reads no clock and keeps no hidden state. A call is a plain [Call] value;
// [Fire] takes it and a [Trigger] and returns the next Call, the one
// [Transition] to persist, and a [Decision] saying what to do next. The
// machine is built with github.com/qmuntal/stateless over that value
// (external storage); [Graph] renders it.
//
// # The caller's loop
//
// For each call the run loop (package workflow) does, in this order:
//
//  1. Prepare: validate the arguments against the tool's inputSchema and
//     record the intent; c := New(idempotency). The first trigger is
//     Dispatch, or FailDefinitive if the arguments are invalid (then nothing
//     is ever sent).
//  2. Decide: c, tr, d, err := Fire(c, trigger, reason). On err, stop: the
//     trigger is illegal in this state and nothing may be sent.
//  3. Persist: append tr as a call.transition event {from, to, trigger,
//     reason} and wait for the commit. Nothing goes out before its intent
//     is durable; a crash now leaves a log that Rebuild reads back.
//  4. Act on d, as listed below. If tr.To is terminal, the call is over.
//  5. Observe the outcome, persist its evidence, classify it as the next
//     trigger and go to step 2: [Succeed], [FailDefinitive],
//     [FailAmbiguous] or [FailPossiblyExecuted] after a send; after a
//     reconnect, [Reconnected], [SchemaChanged], [ToolMissing] or
//     [ReconnectFailed]; [Cancel] at any time on user cancel. A
//     task-augmented tools/call answered with a CreateTaskResult is
//     [TaskAccepted]; its taskId (and the sealed session id needed to reach
//     it) is persisted in the same commit as that transition.
//
// The decisions of step 4:
//
//   - [DecideSend]: send the request.
//   - [DecideReconnect]: open a new session, refresh tools/list and compare
//     the tool's schema digest with the one recorded at prepared.
//   - [DecideResend]: send the same params again with a new JSON-RPC id
//     (keyed calls keep their idempotency key).
//   - [DecideNone]: send nothing; the call is over, or a request is already
//     in flight.
//   - [DecidePoll]: ask tasks/get about the recorded task after its
//     pollInterval; fire [TaskWorking] on the first "working" (later
//     identical statuses are folded evidence, not triggers),
//     [TaskInputRequired], [TaskCancelled], or, once "completed" or
//     "failed", fetch tasks/result and fire [Succeed] or [FailDefinitive]
//     (validated exactly like a tools/call result). A timeout, a lost stream,
//     a 5xx or a malformed answer is [FailAmbiguous]: poll again. An unknown
//     or expired task (-32602) or a 404 for its session is [TaskLost].
//   - [DecideCancelTask]: send tasks/cancel (best effort, recorded); fire
//     [TaskCancelled] if the server confirms, [Succeed] or [FailDefinitive]
//     if it had finished first (from cancelling), else
//     [FailPossiblyExecuted].
//
// Resuming an interrupted SSE stream (GET + Last-Event-ID) is not a resend
// and is not a trigger: it is transport business, legal for every class.
//
// After a restart, [Rebuild] replays the persisted transitions and yields the
// same Call, including Redispatches, so the redispatch budget survives. A
// call found accepted or polling gets [FailAmbiguous] ("interrupted") and is
// polled again on its recorded session, whatever its class; a call found
// input_required or cancelling sends tasks/cancel again.
//
// # Rules
//
// An ambiguous failure (timeout, transport loss after send, session expiry,
// malformed response) in dispatched leads to reconnecting only when the
// class is pure, idempotent or keyed and no redispatch has happened
// ([RedispatchBudget] is 1); otherwise to uncertain with reason
// "not_redispatchable:<class>" or "redispatch_budget_spent". at_most_once and
// unknown therefore never reach reconnecting, and Reconnected is guarded too,
// so even a forged Call cannot be resent. Reconnected counts the redispatch.
//
// Choices where docs/ARCHITECTURE.md, "The call state machine" leaves room, each covered by a test:
//
//   - A second failure is final. An ambiguous failure of the redispatched
//     request goes to uncertain ("second_failure"), not failed: that request
//     may have run, and only an operator can say. A 5xx or a cancel there is
//     uncertain too; a definitive failure is failed.
//   - Cancel goes to cancelled only from prepared, where nothing was sent.
//     From dispatched, redispatched and also reconnecting it goes to uncertain
//     ("cancelled_after_send"): in reconnecting the first request was sent
//     and failed ambiguously, so it may have run.
//   - SchemaChanged and ToolMissing go to failed, as docs/ARCHITECTURE.md, "The call state machine" says, and
//     nothing is resent. ReconnectFailed goes to uncertain
//     ("reconnect_failed"): no resend happened, but the first request failed
//     ambiguously and may have run, so only an operator can say.
//   - Uncertain is terminal for the run loop; only an operator's
//     [ReconcileApplied] or [ReconcileNotApplied] leaves it.
//
// MCP tasks (2025-11-25): once the CreateTaskResult is on disk (accepted),
// the only ambiguous window of a call is closed. A failed, timed-out or
// interrupted poll polls the same task again (polling, reason "repoll"): not
// a resend, legal for every class. A task the server no longer knows may
// have run, so [TaskLost] follows the redispatch rule of dispatched, with
// reason "task_lost" when it ends uncertain. A task that wants input
// (input_required) ends uncertain ("input_required") after tasks/cancel,
// since agentctl offers no elicitation. A user cancel while a task runs goes
// to cancelling, and only the server's confirmation makes it cancelled; a
// task the server cancelled on its own is failed ("task_cancelled_by_server").
// A JSON-RPC error -32042 on the tools/call is [URLElicitationRequired]:
// uncertain ("url_elicitation_required"), since a person must act first.
//
// Illegal triggers return an error wrapping [ErrIllegalTransition] naming the
// state and trigger (and any unmet guard); Fire never panics.
package fsm
