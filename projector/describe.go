package projector

import (
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// Describe renders an event as one stable line for golden tests and logs:
// the type, then what distinguishes it (method and direction of a frame,
// from->to of a transition, the state of a finish). A fact that carries a
// call's move ends with "->" and the state it moves the call to; a
// Describer also knows the state it moves from.
func Describe(e events.Event) string {
	return (&Describer{}).Describe(e)
}

// Describer is Describe over a run's events in log order: it remembers
// each call's state, so a fact carrying a move ends with "from->to" as
// call.transition does.
type Describer struct {
	calls Calls
}

// Describe renders e as Describe does, with the from state of a move.
func (d *Describer) Describe(e events.Event) string {
	if d.calls == nil {
		d.calls = Calls{}
	}
	s := describe(e)
	if e.Type == vocab.TypeCallPrepared {
		if p, err := vocab.Decode[vocab.CallPrepared](e); err == nil {
			d.calls.Prepared(p)
		}
		return s
	}
	t, ok, err := vocab.EventMove(e)
	if !ok || err != nil {
		return s
	}
	t, _ = d.calls.Move(e, t)
	if e.Type == vocab.TypeCallTransition {
		return s
	}
	return s + " " + t.From + "->" + t.To
}

func describe(e events.Event) string {
	switch {
	case strings.HasPrefix(e.Type, vocab.FramePrefix):
		f, err := vocab.Decode[vocab.Frame](e)
		if err == nil {
			s := e.Type + " " + f.Dir
			if f.Method != "" {
				s += " " + f.Method
			}
			return s
		}
	case e.Type == vocab.TypeReplayFrames:
		r, err := vocab.Decode[vocab.ReplayFrames](e)
		if err == nil {
			what := "session"
			if r.EffectID != "" {
				what = "call"
			}
			return e.Type + " " + what
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
	case e.Type == vocab.TypeRunFinished:
		r, err := vocab.Decode[vocab.RunFinished](e)
		if err == nil {
			return e.Type + " " + r.State
		}
	}
	return e.Type
}
