package projector_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/projector"
)

func ev(seq int64, typ, payload string) events.Event {
	return events.Event{RunID: "run-x", Seq: seq, Stream: "call/e1", Type: typ, Payload: payload}
}

// TestTransitions_FromFacts: the transitions of a call are rebuilt from
// the moves its facts carry (From from the state before), the same as the
// call.transition events an older log holds; a move the machine would not
// make (an illegal trigger, or another target than the machine's) is a
// corrupt log: *events.Error (exit 5) naming the call and the seq.
func TestTransitions_FromFacts(t *testing.T) {
	prep := ev(1, vocab.TypeCallPrepared, `{"effectId":"e1","idempotency":"idempotent","generation":1,"state":"prepared"}`)
	facts := []events.Event{prep,
		ev(2, "mcp.request", `{"dir":"out","kind":"request","method":"tools/call","remote":"r","generation":1,"effectId":"e1","move":{"to":"dispatched","trigger":"dispatch","generation":1},"body":{}}`),
		ev(3, "mcp.response", `{"dir":"in","kind":"response","remote":"r","generation":1,"effectId":"e1","body":{}}`),
		ev(4, vocab.TypeCallResult, `{"effectId":"e1","isError":false,"resultDigest":"d","move":{"to":"succeeded","trigger":"succeed","generation":1}}`),
	}
	old := []events.Event{prep,
		ev(2, vocab.TypeCallTransition, `{"effectId":"e1","from":"prepared","to":"dispatched","trigger":"dispatch","generation":1,"redispatches":0}`),
		ev(3, "mcp.request", `{"dir":"out","kind":"request","method":"tools/call","remote":"r","generation":1,"effectId":"e1","body":{}}`),
		ev(4, vocab.TypeCallResult, `{"effectId":"e1","isError":false,"resultDigest":"d"}`),
		ev(5, vocab.TypeCallTransition, `{"effectId":"e1","from":"dispatched","to":"succeeded","trigger":"succeed","generation":1,"redispatches":0}`),
	}
	got, err := projector.Transitions(facts)
	if err != nil {
		t.Fatal(err)
	}
	want, err := projector.Transitions(old)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || len(want) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("from facts %+v\nfrom call.transition %+v", got, want)
	}
	for name, bad := range map[string]events.Event{
		"illegal trigger": ev(5, vocab.TypeCallError, `{"effectId":"e1","kind":"k","message":"m","move":{"to":"dispatched","trigger":"dispatch","generation":1}}`),
		"other target":    ev(4, vocab.TypeCallResult, `{"effectId":"e1","isError":false,"resultDigest":"d","move":{"to":"failed","trigger":"succeed","generation":1}}`),
	} {
		log := append(append([]events.Event{}, facts[:3]...), facts[3:]...)
		if bad.Seq == 4 {
			log = append(log[:3], bad)
		} else {
			log = append(log, bad)
		}
		_, err := projector.Transitions(log)
		var se *events.Error
		if !errors.As(err, &se) || !errors.Is(err, fsm.ErrIllegalTransition) || !strings.Contains(err.Error(), "call e1") ||
			!strings.Contains(err.Error(), "seq "+map[bool]string{true: "4", false: "5"}[bad.Seq == 4]) {
			t.Errorf("%s: %v; want an *events.Error naming call e1 and its seq", name, err)
		}
	}
}
