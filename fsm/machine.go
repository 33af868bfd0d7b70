package fsm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/qmuntal/stateless"
)

// ErrIllegalTransition is returned (wrapped with the state and trigger) when
// a trigger is not allowed in the call's state, so a caller bug or a corrupt
// log stops the call instead of sending something it must not.
var ErrIllegalTransition = errors.New("fsm: illegal transition")

// Call is the whole state of one call's machine. It is a plain value that
// Rebuild derives from the call's transition events, so nothing about a
// call lives only in memory.
type Call struct {
	State       State
	Idempotency Idempotency
	// Redispatches counts resends so far; the budget is RedispatchBudget.
	Redispatches int
	// InputRounds counts the input-required results (2026-07-28 MRTR)
	// answered or being answered; at most MaxInputRounds.
	InputRounds int
	// ByInputResult: the call is in input_required because of an
	// input-required result (set on entry by InputRequested), not because
	// an MCP task asked for input (cleared on entry by TaskInputRequired).
	ByInputResult bool
}

// Transition is what the caller must persist as a call.transition event
// BEFORE acting on the Decision that came with it, so the log always holds
// the intent of anything that goes out.
type Transition struct {
	From, To State
	Trigger  Trigger
	// Reason is a machine reason code (see the Reason constants) when the
	// machine chose the outcome, then ": " and the caller's detail; otherwise
	// the caller's reason as given.
	Reason string
}

// String renders a transition as one stable line for logs and golden files.
func (t Transition) String() string {
	s := fmt.Sprintf("%s -%s-> %s", t.From, t.Trigger, t.To)
	if t.Reason != "" {
		s += " (" + t.Reason + ")"
	}
	return s
}

// New starts a call in Prepared, the state in which its intent is recorded;
// an empty class means Unknown, the declared default.
func New(idem Idempotency) Call {
	if idem == "" {
		idem = Unknown
	}
	return Call{State: Prepared, Idempotency: idem}
}

// Fire applies one trigger to c and returns the next Call, the single
// Transition to persist, and what to do once it is durable. It never does
// I/O and never panics; an illegal trigger returns c unchanged and an error
// wrapping ErrIllegalTransition.
func Fire(c Call, t Trigger, reason string) (Call, Transition, Decision, error) {
	idem, err := ParseIdempotency(string(c.Idempotency))
	if err != nil {
		return c, Transition{}, DecideNone, fmt.Errorf("fsm: fire %q in state %q: %w", t, c.State, err)
	}
	before := c
	before.Idempotency = idem
	next := before
	m := machines.Get().(*pooledMachine)
	m.state = next.State
	err = m.sm.Fire(t, &next)
	next.State = m.state
	machines.Put(m)
	if err != nil {
		return c, Transition{}, DecideNone, err
	}
	tr := Transition{
		From:    before.State,
		To:      next.State,
		Trigger: t,
		Reason:  joinReason(reasonCode(before, t, next.State), reason),
	}
	return next, tr, decide(next), nil
}

// Rebuild replays a call's persisted transitions from New(idem), so the
// state and the redispatch budget survive a restart. Every transition must
// start where the previous one ended and be the one Fire gives for its
// trigger; otherwise the error wraps ErrIllegalTransition and the returned
// Call is the state before the offending transition. Reasons are not compared.
func Rebuild(idem Idempotency, ts []Transition) (Call, error) {
	if _, err := ParseIdempotency(string(idem)); err != nil {
		return Call{}, fmt.Errorf("fsm: rebuild: %w", err)
	}
	c := New(idem)
	for i, t := range ts {
		if t.From != c.State {
			return c, fmt.Errorf("fsm: rebuild: transition %d (%s) starts in %q but the call is in %q: %w",
				i, t, t.From, c.State, ErrIllegalTransition)
		}
		next, got, _, err := Fire(c, t.Trigger, t.Reason)
		if err != nil {
			return c, fmt.Errorf("fsm: rebuild: transition %d (%s): %w", i, t, err)
		}
		if got.To != t.To {
			return c, fmt.Errorf("fsm: rebuild: transition %d (%s) ends in %q but the machine gives %q: %w",
				i, t, t.To, got.To, ErrIllegalTransition)
		}
		c = next
	}
	return c, nil
}

// Graph returns the machine as DOT (stateless ToGraph), so reviewers can see
// every edge and guard; the output is deterministic and kept as a golden file.
func Graph() string {
	s := Prepared
	return newMachine(&s).ToGraph()
}

// pooledMachine is a configured machine and the cell its state lives in:
// configuring one costs more than firing it, so Fire reuses them.
type pooledMachine struct {
	sm    *stateless.StateMachine
	state State
}

var machines = sync.Pool{New: func() any {
	m := &pooledMachine{}
	m.sm = newMachine(&m.state)
	return m
}}

// newMachine configures a stateless machine whose state lives in *s, the
// caller's plain value. Machines are pooled (machines), not built per Fire:
// Fire takes one from the pool, loads the call's state into *s, fires and
// puts it back, so a machine serves one Fire at a time and nothing is
// shared between goroutines.
func newMachine(s *State) *stateless.StateMachine {
	sm := stateless.NewStateMachineWithExternalStorage(
		func(context.Context) (stateless.State, error) { return *s, nil },
		func(_ context.Context, st stateless.State) error {
			next, ok := st.(State)
			if !ok {
				return fmt.Errorf("fsm: internal: state %v has type %T", st, st)
			}
			*s = next
			return nil
		},
		stateless.FiringImmediate,
	)
	sm.OnUnhandledTrigger(illegal)
	configureCall(sm)
	configureTask(sm)
	sm.Configure(Uncertain).
		Permit(ReconcileApplied, Succeeded).
		Permit(ReconcileNotApplied, Failed)
	sm.Configure(Succeeded)
	sm.Configure(Failed)
	sm.Configure(Cancelled)
	return sm
}

// configureCall configures the states of a tools/call answered in its
// response: prepared, dispatched, and the one redispatch.
func configureCall(sm *stateless.StateMachine) {
	sm.Configure(Prepared).
		Permit(Dispatch, Dispatched).
		Permit(FailDefinitive, Failed). // arguments violate inputSchema: nothing is sent
		Permit(Cancel, Cancelled)

	sm.Configure(Dispatched).
		Permit(Succeed, Succeeded).
		Permit(FailDefinitive, Failed).
		Permit(FailAmbiguous, Reconnecting, redispatchAllowed).
		Permit(FailAmbiguous, Uncertain, redispatchRefused).
		Permit(FailPossiblyExecuted, Uncertain).
		Permit(Cancel, Uncertain).
		Permit(TaskAccepted, Accepted).
		Permit(URLElicitationRequired, Uncertain).
		Permit(InputRequested, InputRequired, inputRoundLeft).
		Permit(InputRequested, Failed, inputRoundsSpent)

	// The first request was sent and failed ambiguously: it may have run.
	// A changed or missing tool is failed (docs/ARCHITECTURE.md, "The call state machine"): the call cannot be
	// completed as declared. No new session, or a cancel, leaves the first
	// request's fate open, so uncertain.
	sm.Configure(Reconnecting).
		Permit(Reconnected, Redispatched, redispatchAllowed).
		Permit(SchemaChanged, Failed).
		Permit(ToolMissing, Failed).
		Permit(ReconnectFailed, Uncertain).
		Permit(FailDefinitive, Failed).
		Permit(Cancel, Uncertain)

	// A second ambiguous failure is final; a call re-issued after an
	// input-required result (InputAnswered) has spent no budget, so its
	// first ambiguous failure follows the rule of dispatched.
	sm.Configure(Redispatched).
		OnEntryFrom(Reconnected, countRedispatch).
		Permit(Succeed, Succeeded).
		Permit(FailDefinitive, Failed).
		Permit(FailAmbiguous, Reconnecting, redispatchAllowed).
		Permit(FailAmbiguous, Uncertain, redispatchRefused).
		Permit(FailPossiblyExecuted, Uncertain).
		Permit(Cancel, Uncertain).
		Permit(TaskAccepted, Accepted).
		Permit(URLElicitationRequired, Uncertain).
		Permit(InputRequested, InputRequired, inputRoundLeft).
		Permit(InputRequested, Failed, inputRoundsSpent)
}

// configureTask configures the states of an MCP task and of a request
// waiting for input.
func configureTask(sm *stateless.StateMachine) {
	// MCP tasks. Once the CreateTaskResult is on disk the only ambiguous
	// window is closed: a failed or interrupted poll polls the same task
	// again (never a resend, so no guard), and only a task the server no
	// longer knows is ambiguous, with the same rule as dispatched.
	sm.Configure(Accepted).
		Permit(TaskWorking, Polling).
		Permit(FailAmbiguous, Polling).
		Permit(Succeed, Succeeded).
		Permit(FailDefinitive, Failed).
		Permit(TaskCancelled, Failed). // cancelled by the server: no result will come
		Permit(FailPossiblyExecuted, Uncertain).
		Permit(TaskLost, Reconnecting, redispatchAllowed).
		Permit(TaskLost, Uncertain, redispatchRefused).
		Permit(TaskInputRequired, InputRequired).
		Permit(Cancel, Cancelling)

	sm.Configure(Polling).
		PermitReentry(FailAmbiguous).
		Permit(Succeed, Succeeded).
		Permit(FailDefinitive, Failed).
		Permit(TaskCancelled, Failed).
		Permit(FailPossiblyExecuted, Uncertain).
		Permit(TaskLost, Reconnecting, redispatchAllowed).
		Permit(TaskLost, Uncertain, redispatchRefused).
		Permit(TaskInputRequired, InputRequired).
		Permit(Cancel, Cancelling)

	// For a task, agentctl offers no elicitation: whatever tasks/cancel
	// answers, the task may have done part of its work, so an operator must
	// decide. For an input-required result (MRTR) the tool has not run:
	// the answers re-issue the request, and a cancel, or input that cannot
	// be given, ends it with nothing executed.
	sm.Configure(InputRequired).
		OnEntryFrom(InputRequested, countInputRound).
		OnEntryFrom(TaskInputRequired, markTaskInput).
		Permit(TaskCancelled, Uncertain, taskInput).
		Permit(FailAmbiguous, Uncertain, taskInput).
		Permit(FailPossiblyExecuted, Uncertain, taskInput).
		Permit(TaskLost, Uncertain, taskInput).
		Permit(Cancel, Uncertain, taskInput).
		Permit(Cancel, Cancelled, mrtrInput).
		Permit(InputAnswered, Redispatched, mrtrInput).
		Permit(InputAnswered, Polling, taskInput). // 2026-07-28: tasks/update sent, the task polled again
		Permit(FailDefinitive, Failed, mrtrInput)

	// Only the server's confirmation makes a running task cancelled; a task
	// that finished first keeps its outcome.
	sm.Configure(Cancelling).
		Permit(TaskCancelled, Cancelled).
		Permit(Succeed, Succeeded).
		Permit(FailDefinitive, Failed).
		Permit(FailAmbiguous, Uncertain).
		Permit(FailPossiblyExecuted, Uncertain).
		Permit(TaskLost, Uncertain)
}

// illegal turns stateless's unhandled-trigger callback into ErrIllegalTransition.
func illegal(_ context.Context, st stateless.State, t stateless.Trigger, unmet []string) error {
	if len(unmet) > 0 {
		return fmt.Errorf("%w: trigger %q in state %q: guard %s not met",
			ErrIllegalTransition, t, st, strings.Join(unmet, ", "))
	}
	return fmt.Errorf("%w: trigger %q in state %q", ErrIllegalTransition, t, st)
}
