package projector

import (
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
)

// Calls rebuilds each call's state machine from the log's facts: the state
// call.prepared starts it in, then each move a fact carries (or, in logs
// written before moves rode on facts, each call.transition). A move the
// machine would not make from the call's state with its trigger is a
// corrupt log: an *events.Error (storage, exit 5) naming the call and seq.
type Calls map[string]*fsm.Call

// Prepared starts the call p prepares.
func (cs Calls) Prepared(p vocab.CallPrepared) {
	c := fsm.New(fsm.Idempotency(p.Idempotency))
	cs[p.EffectID] = &c
}

// Move folds the transition t recorded by e (vocab.MoveOf) into its call
// and returns it with From set. A move of a call no call.prepared started
// is taken as recorded (a replay's view of a source, a pruned prefix).
func (cs Calls) Move(e events.Event, t vocab.CallTransition) (vocab.CallTransition, error) {
	c := cs[t.EffectID]
	if c == nil {
		return t, nil
	}
	old := t.From != "" // a call.transition: the log said where it started
	if !old {
		t.From = string(c.State)
	}
	next, got, _, err := fsm.Fire(*c, fsm.Trigger(t.Trigger), t.Reason)
	switch {
	case old && (err != nil || string(got.To) != t.To || t.From != string(c.State)):
		// Read as before moves were checked: the state is the one recorded.
		c.State, c.Redispatches = fsm.State(t.To), t.Redispatches
		return t, nil
	case err != nil:
		return t, corruptMove(e, t, err)
	case string(got.To) != t.To:
		return t, corruptMove(e, t, fmt.Errorf("the machine moves it to %q: %w", got.To, fsm.ErrIllegalTransition))
	}
	*c = next
	return t, nil
}

// Fact folds the move the decoded payload p of e carries, if any; ok
// reports whether it carried one.
func (cs Calls) Fact(e events.Event, p any) (t vocab.CallTransition, ok bool, err error) {
	t, ok = vocab.MoveOf(p)
	if !ok {
		return t, false, nil
	}
	t, err = cs.Move(e, t)
	return t, true, err
}

func corruptMove(e events.Event, t vocab.CallTransition, err error) error {
	return &events.Error{Op: fmt.Sprintf("rebuild call %s at seq %d of run %s", t.EffectID, e.Seq, e.RunID),
		Err: fmt.Errorf("corrupt log: %s records a move %s -%s-> %s: %w", e.Type, t.From, t.Trigger, t.To, err)}
}

// Transitions returns every call transition evs record, in log order, with
// From set: the moves facts carry and call.transition events alike. A
// move the machine would not make is the corrupt-log error of Calls.
func Transitions(evs []events.Event) ([]vocab.CallTransition, error) {
	cs := Calls{}
	var out []vocab.CallTransition
	for _, e := range evs {
		if e.Type == vocab.TypeCallPrepared {
			p, err := vocab.Decode[vocab.CallPrepared](e)
			if err != nil {
				return nil, err
			}
			cs.Prepared(p)
			continue
		}
		t, ok, err := vocab.EventMove(e)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		if t, err = cs.Move(e, t); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}
