package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
)

// TestCLI_CorruptMoveIsExit5: a fact whose move the state machine would
// not make from the call's recorded state (here a dispatch of a call that
// already succeeded) is a corrupt log: replay, resume and the report
// (inspect --html) refuse it with exit 5, naming the call and the seq.
func TestCLI_CorruptMoveIsExit5(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	path := t.TempDir() + "/a.db"
	out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--input", "query=event sourcing", "--db", path, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	log := testkit.OpenDB(t, path, events.Options{})
	evs, err := log.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var effectID string
	for _, e := range evs {
		if e.Type == vocab.TypeCallPrepared {
			p, err := vocab.Decode[vocab.CallPrepared](e)
			if err != nil {
				t.Fatal(err)
			}
			effectID = p.EffectID
			break
		}
	}
	bad := vocab.CallError{EffectID: effectID, Kind: "error", Message: "hand-crafted",
		Move: &vocab.Move{To: "dispatched", Trigger: "dispatch", Generation: 1}}
	got, err := log.Append(context.Background(), runID, []events.Record{{Stream: "call/" + effectID, Type: vocab.TypeCallError, Payload: bad}}, projector.Apply)
	if err != nil {
		t.Fatal(err)
	}
	_ = log.Close()
	want := fmt.Sprintf("call %s at seq %d", effectID, got[0].Seq)
	for _, args := range [][]string{
		{"replay", runID},
		{"resume", runID},
		{"inspect", runID, "--html", "-o", t.TempDir() + "/r.html"},
	} {
		_, stderr, code := cli(t, append(args, "--db", path)...)
		if code != 5 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "corrupt log") {
			t.Errorf("%s: exit %d, stderr %q; want exit 5 naming %q", args[0], code, stderr, want)
		}
	}
}
