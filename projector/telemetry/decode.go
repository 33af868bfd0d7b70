package telemetry

import (
	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

// decode is the one place this package reads event payloads: it returns
// the typed payload of the event types the fold uses, nil for the others.
// (When the vocabulary moves to its own package, only this file changes.)
func decode(e events.Event) (any, error) {
	var v any
	switch e.Type {
	case projector.TypeRunCreated:
		v = &projector.RunCreated{}
	case projector.TypeRunFinished:
		v = &projector.RunFinished{}
	case projector.TypeRunResumed:
		return runResumed{}, nil
	case projector.TypeTaskStarted:
		v = &projector.TaskStarted{}
	case projector.TypeTaskFinished:
		v = &projector.TaskFinished{}
	case projector.TypeSessionOpened:
		v = &projector.SessionOpened{}
	case projector.TypeSessionExpired:
		v = &projector.SessionRef{}
	case projector.TypeCallPrepared:
		v = &projector.CallPrepared{}
	case projector.TypeCallTransition:
		v = &projector.CallTransition{}
	case projector.TypeCallError:
		v = &projector.CallError{}
	case projector.FramePrefix + "request", projector.FramePrefix + "response", projector.FramePrefix + "http_error":
		v = &projector.Frame{}
	default:
		return nil, nil
	}
	if err := e.Decode(v); err != nil {
		return nil, err
	}
	return v, nil
}

// runResumed stands for a run.resumed event (its payload is not read).
type runResumed struct{}

// runCreatedOf decodes a run.created event; nil for any other event or a
// payload that does not decode.
func runCreatedOf(e events.Event) *projector.RunCreated {
	var c projector.RunCreated
	if e.Type != projector.TypeRunCreated || e.Decode(&c) != nil {
		return nil
	}
	return &c
}
