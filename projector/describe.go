package projector

import (
	"strings"

	"github.com/agentctl/agentctl/events"
)

// Describe renders an event as one stable line for golden tests and logs:
// the type, then what distinguishes it (method and direction of a frame,
// from→to of a transition, the state of a finish).
func Describe(e events.Event) string {
	switch {
	case strings.HasPrefix(e.Type, FramePrefix):
		var f Frame
		if e.Decode(&f) == nil {
			s := e.Type + " " + f.Dir
			if f.Method != "" {
				s += " " + f.Method
			}
			return s
		}
	case e.Type == TypeReplayFrames:
		var r ReplayFrames
		if e.Decode(&r) == nil {
			what := "session"
			if r.EffectID != "" {
				what = "call"
			}
			return e.Type + " " + what
		}
	case e.Type == TypeCallTransition:
		var t CallTransition
		if e.Decode(&t) == nil {
			return e.Type + " " + t.From + "->" + t.To
		}
	case e.Type == TypeTaskFinished:
		var t TaskFinished
		if e.Decode(&t) == nil {
			return e.Type + " " + t.TaskID + " " + t.State
		}
	case e.Type == TypeTaskSkipped:
		var t TaskSkipped
		if e.Decode(&t) == nil {
			return e.Type + " " + t.TaskID
		}
	case e.Type == TypeTaskStarted:
		var t TaskStarted
		if e.Decode(&t) == nil {
			return e.Type + " " + t.TaskID
		}
	case e.Type == TypeRunFinished:
		var r RunFinished
		if e.Decode(&r) == nil {
			return e.Type + " " + r.State
		}
	}
	return e.Type
}
