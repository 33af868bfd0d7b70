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
//     [ReconnectFailed]; [Cancel] at any time on user cancel.
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
//
// Resuming an interrupted SSE stream (GET + Last-Event-ID) is not a resend
// and is not a trigger: it is transport business, legal for every class.
//
// After a restart, [Rebuild] replays the persisted transitions and yields the
// same Call, including Redispatches, so the redispatch budget survives.
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
// Choices where DESIGN §5 leaves room, each covered by a test:
//
//   - A second failure is final. An ambiguous failure of the redispatched
//     request goes to uncertain ("second_failure"), not failed: that request
//     may have run, and only an operator can say. A 5xx or a cancel there is
//     uncertain too; a definitive failure is failed.
//   - Cancel goes to cancelled only from prepared, where nothing was sent.
//     From dispatched, redispatched and also reconnecting it goes to uncertain
//     ("cancelled_after_send"): in reconnecting the first request was sent
//     and failed ambiguously, so it may have run.
//   - SchemaChanged and ToolMissing go to failed, as DESIGN §5 says, and
//     nothing is resent. ReconnectFailed goes to uncertain
//     ("reconnect_failed"): no resend happened, but the first request failed
//     ambiguously and may have run, so only an operator can say.
//   - Uncertain is terminal for the run loop; only an operator's
//     [ReconcileApplied] or [ReconcileNotApplied] leaves it.
//
// Illegal triggers return an error wrapping [ErrIllegalTransition] naming the
// state and trigger (and any unmet guard); Fire never panics.
package fsm
