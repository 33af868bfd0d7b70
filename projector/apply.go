package projector

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// Apply folds evs (one committed batch of one run) into the projection
// tables inside tx. It is an events.Applier. The runs row changes only
// with the run's own events: its calls and events are counted from
// protocol_calls and the log when read (Inspect, FindRuns), so a call's
// commit does not rewrite it.
func Apply(ctx context.Context, tx *events.Tx, evs []events.Event) error {
	if len(evs) == 0 {
		return nil
	}
	var f fold
	for _, e := range evs {
		done, err := f.apply(ctx, tx, e)
		if err == nil && !done {
			if err = f.flush(ctx, tx); err == nil {
				err = applyOne(ctx, tx, e)
			}
		}
		if err != nil {
			return fmt.Errorf("project %s seq %d: %w", e.Type, e.Seq, err)
		}
	}
	return f.flush(ctx, tx)
}

// RowStatus is the status of a new protocol row: "recorded" when the row
// was copied from a source run by replay, else status.
func RowStatus(sourceRunID, status string) string {
	if sourceRunID != "" {
		return "recorded"
	}
	return status
}

// CallStatus maps a state-machine state to the protocol_calls status.
func CallStatus(fsmState string) string {
	switch fsmState {
	case "reconnecting", "redispatched", "accepted", "polling", "input_required", "cancelling":
		return "dispatched" // live: a request (or the task it made) may be running
	}
	return fsmState
}

// handler projects one event into the tables; decoded makes one from a
// function of the event's payload type.
type handler func(ctx context.Context, tx *events.Tx, e events.Event) error

// handlers holds the projection of each event type that changes a table.
// Event types not in it change none: frames, stream.truncated and
// replay.frames are evidence that inspect reads from the log itself.
var handlers = map[string]handler{
	vocab.TypeRunCreated:      decoded(applyRunCreated),
	vocab.TypeRunStarted:      decoded(applyRunStarted),
	vocab.TypeRunFinished:     decoded(applyRunFinished),
	vocab.TypeRunResumed:      decoded(applyRunResumed),
	vocab.TypeTaskStarted:     decoded(applyTaskStarted),
	vocab.TypeTaskFinished:    decoded(applyTaskFinished),
	vocab.TypeTaskSkipped:     decoded(applyTaskSkipped),
	vocab.TypeTaskRetry:       decoded(applyTaskRetry),
	vocab.TypeSessionOpened:   decoded(applySessionOpened),
	vocab.TypeSessionCatalog:  decoded(applySessionCatalog),
	vocab.TypeSessionExpired:  decoded(applySessionExpired),
	vocab.TypeSessionAttached: decoded(noTable[vocab.SessionRef]), // a session's users are its calls' rows
	vocab.TypeCallPrepared:    decoded(applyCallPrepared),
	vocab.TypeCallTransition:  decoded(applyCallTransition),
	vocab.TypeCallResult:      decoded(applyCallResult),
	vocab.TypeCallError:       decoded(applyCallError),
	vocab.TypeCallReconciled:  decoded(applyCallReconciled),

	// Facts that change no table but may carry a call's move.
	vocab.TypeCallTaskAccepted: decoded(noTable[vocab.CallTaskAccepted]),
	vocab.TypeCallTaskStatus:   decoded(noTable[vocab.CallTaskStatus]),
	vocab.TypeCallTaskCancel:   decoded(noTable[vocab.CallTaskCancel]),
	vocab.TypeReplayFrames:     decoded(noTable[vocab.ReplayFrames]),
}

func noTable[P any](context.Context, *events.Tx, events.Event, P) error { return nil }

// decoded adapts fn to a handler that first decodes the event's payload
// into a P, then moves the call when the fact carries a move (a handler
// that folds the move into its own statement clears it from p).
func decoded[P any](fn func(ctx context.Context, tx *events.Tx, e events.Event, p P) error) handler {
	return func(ctx context.Context, tx *events.Tx, e events.Event) error {
		p, err := vocab.Decode[P](e)
		if err != nil {
			return err
		}
		if err := fn(ctx, tx, e, p); err != nil {
			return err
		}
		if t, ok := vocab.MoveOf(p); ok && e.Type != vocab.TypeCallTransition && e.Type != vocab.TypeCallResult {
			return applyCallTransition(ctx, tx, e, t)
		}
		return nil
	}
}

func applyOne(ctx context.Context, tx *events.Tx, e events.Event) error {
	if h := handlers[e.Type]; h != nil {
		return h(ctx, tx, e)
	}
	if vocab.IsFrame(e.Type) { // a request frame may carry the move it makes
		t, ok, err := vocab.EventMove(e)
		if err != nil || !ok {
			return err
		}
		return applyCallTransition(ctx, tx, e, t)
	}
	return nil
}

// exec runs one statement of a handler.
func exec(ctx context.Context, tx *events.Tx, q string, args ...any) error {
	_, err := tx.Exec(ctx, q, args...)
	return err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
