package projector

import (
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// Describe renders an event as one stable line for golden tests and logs:
// the type, then what distinguishes it (method and direction of a frame,
// from→to of a transition, the state of a finish).
func Describe(e events.Event) string {
	switch {
	case strings.HasPrefix(e.Type, vocab.FramePrefix):
		f, err := vocab.Decode[vocab.Frame](e)
		if err == nil {
			s := e.Type + " " + f.Dir
			if f.Method != "" {
				s += " " + f.Method
			}
			return s + moved(f)
		}
	case e.Type == vocab.TypeReplayFrames:
		r, err := vocab.Decode[vocab.ReplayFrames](e)
		if err == nil {
			what := "session"
			if r.EffectID != "" {
				what = "call"
			}
			return e.Type + " " + what + moved(r)
		}
	case e.Type == vocab.TypeCallTransition:
		t, err := vocab.Decode[vocab.CallTransition](e)
		if err == nil {
			return e.Type + " " + t.From + "->" + t.To
		}
	case e.Type == vocab.TypeTaskFinished:
		t, err := vocab.Decode[vocab.TaskFinished](e)
		if err == nil {
			return e.Type + " " + t.TaskID + " " + t.State
		}
	case e.Type == vocab.TypeTaskSkipped:
		t, err := vocab.Decode[vocab.TaskSkipped](e)
		if err == nil {
			return e.Type + " " + t.TaskID
		}
	case e.Type == vocab.TypeTaskStarted:
		t, err := vocab.Decode[vocab.TaskStarted](e)
		if err == nil {
			return e.Type + " " + t.TaskID
		}
	case strings.HasPrefix(e.Type, "call."):
		if p, err := vocab.Payload(e); err == nil {
			return e.Type + moved(p)
		}
	case e.Type == vocab.TypeRunFinished:
		r, err := vocab.Decode[vocab.RunFinished](e)
		if err == nil {
			return e.Type + " " + r.State
		}
	}
	return e.Type
}

// moved renders the move a fact carries as " ->state" ("" when none).
func moved(p any) string {
	if t, ok := vocab.MoveOf(p); ok {
		return " ->" + t.To
	}
	return ""
}
