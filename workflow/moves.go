package workflow

import (
	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// factsOnly rewrites a batch about to be committed so that a call's state
// change rides on the fact that caused it instead of restating it
// (docs/ARCHITECTURE.md, "Facts, not restatements"). call.fire decided each
// transition with the machine and queued it as a call.transition record
// right after the fact it follows (call.error, call.result, a response
// frame, ...) or right
// before the request it allows (the request frame, a replay's
// replay.frames); factsOnly moves it into that record's "move" and drops
// it. A transition with no such neighbour on its call's stream stays a
// call.transition (a result committed before its validation finished
// succeeds that way). session.attached rides on the call.prepared of the
// task that attaches (sessionFrom). Records are otherwise kept in order.
func factsOnly(recs []events.Record) []events.Record {
	var drop []bool
	for i := range recs {
		var ok bool
		switch recs[i].Type {
		case vocab.TypeCallTransition:
			ok = mergeMove(recs, drop, i)
		case vocab.TypeSessionAttached:
			ok = mergeAttach(recs, i)
		default:
			continue
		}
		if ok {
			if drop == nil {
				drop = make([]bool, len(recs))
			}
			drop[i] = true
		}
	}
	if drop == nil {
		return recs
	}
	out := recs[:0:0]
	for i, r := range recs {
		if !drop[i] {
			out = append(out, r)
		}
	}
	return out
}

// mergeMove moves the transition recs[i] into the record of its stream
// just before it (a fact without a move: call.error, call.result, ..., or
// the response frame that caused it) or just after it (the outgoing
// request frame, or a replay's replay.frames, it allows).
func mergeMove(recs []events.Record, drop []bool, i int) bool {
	t, ok := recs[i].Payload.(vocab.CallTransition)
	if !ok {
		return false
	}
	t.From = ""
	stream := recs[i].Stream
	for j := i - 1; j >= 0; j-- {
		if recs[j].Stream != stream || (drop != nil && drop[j]) {
			continue
		}
		if f, ok := recs[j].Payload.(vocab.Frame); ok && (f.Dir != "in" || f.Kind != "response") {
			break
		}
		if _, has := vocab.MoveOf(recs[j].Payload); has {
			break
		}
		if p, ok := vocab.WithMove(recs[j].Payload, t); ok {
			recs[j].Payload = p
			return true
		}
		break
	}
	for j := i + 1; j < len(recs); j++ {
		if recs[j].Stream != stream {
			continue
		}
		switch p := recs[j].Payload.(type) {
		case vocab.Frame:
			if p.Dir != "out" || p.Kind != "request" || p.Move != nil {
				return false
			}
		case vocab.ReplayFrames:
			if p.Move != nil {
				return false
			}
		default:
			return false
		}
		p, _ := vocab.WithMove(recs[j].Payload, t)
		recs[j].Payload = p
		return true
	}
	return false
}

// mergeAttach records session.attached recs[i] as the sessionFrom of the
// attaching task's next call.prepared on that session, if it is in the
// batch.
func mergeAttach(recs []events.Record, i int) bool {
	ref, ok := recs[i].Payload.(vocab.SessionRef)
	if !ok || ref.FromTaskID == "" {
		return false
	}
	for j := i + 1; j < len(recs); j++ {
		p, ok := recs[j].Payload.(vocab.CallPrepared)
		if !ok || p.TaskID != ref.TaskID {
			continue
		}
		if p.Server != ref.Remote || p.Generation != ref.Generation || p.SessionFrom != "" {
			return false
		}
		p.SessionFrom = ref.FromTaskID
		recs[j].Payload = p
		return true
	}
	return false
}
