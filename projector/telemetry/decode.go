package telemetry

import (
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// used are the event types the fold reads (besides frames and
// run.resumed): the ones it folds into spans, and every fact that may
// carry a call's move.
var used = map[string]bool{
	vocab.TypeRunCreated: true, vocab.TypeRunFinished: true, vocab.TypeTaskStarted: true, vocab.TypeTaskFinished: true,
	vocab.TypeSessionOpened: true, vocab.TypeSessionExpired: true, vocab.TypeCallPrepared: true,
	vocab.TypeCallTransition: true, vocab.TypeCallError: true, vocab.TypeCallResult: true, vocab.TypeCallReconciled: true,
	vocab.TypeCallTaskAccepted: true, vocab.TypeCallTaskStatus: true, vocab.TypeCallTaskCancel: true, vocab.TypeReplayFrames: true,
}

// decode is the one place this package reads event payloads: the typed
// payload (vocab.Payload) of the event types the fold uses, nil for the
// others.
func decode(e events.Event) (any, error) {
	if e.Type == vocab.TypeRunResumed {
		return runResumed{}, nil // its payload is not read
	}
	if vocab.IsFrame(e.Type) {
		switch strings.TrimPrefix(e.Type, vocab.FramePrefix) {
		case "request", "response", "http_error":
			return vocab.DecodeFrame(e)
		}
		return nil, nil
	}
	if !used[e.Type] {
		return nil, nil
	}
	return vocab.Payload(e)
}

// runResumed stands for a run.resumed event (its payload is not read).
type runResumed struct{}

// runCreatedOf decodes a run.created event; nil for any other event or a
// payload that does not decode.
func runCreatedOf(e events.Event) *vocab.RunCreated {
	if e.Type != vocab.TypeRunCreated {
		return nil
	}
	c, err := vocab.Decode[vocab.RunCreated](e)
	if err != nil {
		return nil
	}
	return &c
}
