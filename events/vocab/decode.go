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
