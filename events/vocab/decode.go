package vocab

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/events"
)

// ErrUnknownType reports an event type the vocabulary does not define.
var ErrUnknownType = errors.New("vocab: unknown event type")

// Decode returns the payload of e as a P, decrypting a sealed payload with
// the key of the database e came from (a missing or wrong key is
// *events.Error, storage). A frame is read by DecodeFrame's fast path.
// It is the one place that decodes an event payload.
func Decode[P any](e events.Event) (P, error) {
	var p P
	if f, ok := any(&p).(*Frame); ok {
		fr, err := DecodeFrame(e)
		*f = fr
		return p, err
	}
	err := e.Decode(&p)
	return p, err
}

// DecodeNumbers is Decode keeping JSON numbers of untyped members
// (map[string]any, any) as json.Number, exactly as recorded: replay reads
// a run's inputs this way.
func DecodeNumbers[P any](e events.Event) (P, error) {
	var p P
	payload, err := e.Plaintext()
	if err != nil {
		return p, err
	}
	dec := json.NewDecoder(strings.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&p); err != nil {
		return p, fmt.Errorf("decode %s payload at seq %d: %w", e.Type, e.Seq, err)
	}
	return p, nil
}

// decoder decodes one event type's payload into its struct (a value, not
// a pointer).
type decoder func(events.Event) (any, error)

func as[P any](e events.Event) (any, error) { return Decode[P](e) }

// payloads is the dispatch by type: every event type of the log and its
// payload struct. Frames ("mcp." + kind) are Frame.
var payloads = map[string]decoder{
	TypeRunCreated:        as[RunCreated],
	TypeRunStarted:        as[RunStarted],
	TypeRunFinished:       as[RunFinished],
	TypeRunResumed:        as[RunResumed],
	TypeTaskStarted:       as[TaskStarted],
	TypeTaskFinished:      as[TaskFinished],
	TypeTaskSkipped:       as[TaskSkipped],
	TypeTaskRetry:         as[TaskRetryScheduled],
	TypeSessionOpened:     as[SessionOpened],
	TypeSessionCatalog:    as[SessionCatalog],
	TypeSessionExpired:    as[SessionRef],
	TypeSessionAttached:   as[SessionRef],
	TypeSessionReattached: as[SessionReattached],
	TypeCallPrepared:      as[CallPrepared],
	TypeCallTransition:    as[CallTransition],
	TypeCallResult:        as[CallResult],
	TypeCallError:         as[CallError],
	TypeCallReconciled:    as[CallReconciled],
	TypeCallTaskAccepted:  as[CallTaskAccepted],
	TypeCallTaskStatus:    as[CallTaskStatus],
	TypeCallTaskCancel:    as[CallTaskCancel],
	TypeReplayFrames:      as[ReplayFrames],
	TypeAuthStep:          as[AuthStep],
}

// IsFrame reports whether an event type is a protocol frame ("mcp." + kind).
func IsFrame(typ string) bool { return strings.HasPrefix(typ, FramePrefix) }

// Payload decodes e's payload into the struct of its type, returned by
// value (a RunCreated, a Frame, ...); a type the vocabulary does not define
// wraps ErrUnknownType.
func Payload(e events.Event) (any, error) {
	if IsFrame(e.Type) {
		return DecodeFrame(e)
	}
	d := payloads[e.Type]
	if d == nil {
		return nil, fmt.Errorf("%w: %q at seq %d", ErrUnknownType, e.Type, e.Seq)
	}
	return d(e)
}

// Types lists every event type with a payload struct (frames aside).
func Types() []string {
	out := make([]string, 0, len(payloads))
	for t := range payloads {
		out = append(out, t)
	}
	return out
}

// MoveOf returns the call transition a decoded payload records: a
// call.transition as written (logs before moves rode on facts), or the
// Move a fact carries, as a CallTransition with From empty (the state the
// call was in, which the reader knows). ok is false when p records none.
func MoveOf(p any) (t CallTransition, ok bool) {
	var id string
	var m *Move
	switch v := p.(type) {
	case CallTransition:
		return v, true
	case Frame:
		id, m = v.EffectID, v.Move
	case CallError:
		id, m = v.EffectID, v.Move
	case CallResult:
		id, m = v.EffectID, v.Move
	case CallReconciled:
		id, m = v.EffectID, v.Move
	case CallTaskAccepted:
		id, m = v.EffectID, v.Move
	case CallTaskStatus:
		id, m = v.EffectID, v.Move
	case CallTaskCancel:
		id, m = v.EffectID, v.Move
	case ReplayFrames:
		id, m = v.EffectID, v.Move
	}
	if m == nil {
		return CallTransition{}, false
	}
	return CallTransition{EffectID: id, To: m.To, Trigger: m.Trigger, Reason: m.Reason, Generation: m.Generation, Redispatches: m.Redispatches}, true
}

// WithMove returns p with its Move set to t's (p must be a payload type
// MoveOf reads, not a call.transition); ok is false for any other type.
func WithMove(p any, t CallTransition) (any, bool) {
	m := &Move{To: t.To, Trigger: t.Trigger, Reason: t.Reason, Generation: t.Generation, Redispatches: t.Redispatches}
	switch v := p.(type) {
	case Frame:
		v.Move = m
		return v, true
	case CallError:
		v.Move = m
		return v, true
	case CallResult:
		v.Move = m
		return v, true
	case CallReconciled:
		v.Move = m
		return v, true
	case CallTaskAccepted:
		v.Move = m
		return v, true
	case CallTaskStatus:
		v.Move = m
		return v, true
	case CallTaskCancel:
		v.Move = m
		return v, true
	case ReplayFrames:
		v.Move = m
		return v, true
	}
	return p, false
}

// FrameMove reads the move of a frame event without decoding its body
// (frames are written with "move" before "body"): nil when the frame
// records no move.
func FrameMove(e events.Event) (*Move, error) {
	f, err := frameWithMove(e)
	return f.Move, err
}

// frameWithMove is the header of a frame event that records a move (one
// scan, body neither read nor checked), and a zero Frame, nothing decoded
// beyond a search of the text before "body", for one that records none.
func frameWithMove(e events.Event) (Frame, error) {
	p, err := e.Plaintext()
	if err != nil {
		return Frame{}, err
	}
	head := p
	if i := strings.Index(p, `,"body":`); i >= 0 {
		head = p[:i]
	}
	if !strings.Contains(head, `"move"`) {
		return Frame{}, nil
	}
	return DecodeFrameHeader(e)
}

// carriers are the event types (besides frames) that may carry a Move.
var carriers = map[string]bool{TypeCallTransition: true, TypeCallError: true, TypeCallResult: true, TypeCallReconciled: true,
	TypeCallTaskAccepted: true, TypeCallTaskStatus: true, TypeCallTaskCancel: true, TypeReplayFrames: true}

// EventMove returns the call transition e records, for readers that want
// nothing else of it: a call.transition, or the move a fact carries (From
// empty). A frame's body is not decoded unless it carries a move.
func EventMove(e events.Event) (CallTransition, bool, error) {
	if IsFrame(e.Type) {
		f, err := frameWithMove(e)
		if err != nil {
			return CallTransition{}, false, err
		}
		t, ok := MoveOf(f)
		return t, ok, nil
	}
	if !carriers[e.Type] {
		return CallTransition{}, false, nil
	}
	p, err := Payload(e)
	if err != nil {
		return CallTransition{}, false, err
	}
	t, ok := MoveOf(p)
	return t, ok, nil
}
