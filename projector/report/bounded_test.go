package report

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
)

// chattyCallPage writes a finished run of one call with n progress
// notifications, n recorded tasks/get polls and n stream resumptions, and
// returns its report page.
func chattyCallPage(t *testing.T, n int) string {
	t.Helper()
	ctx := context.Background()
	db := testkit.OpenDB(t, "", events.Options{Durability: events.DurabilityNormal})
	const run = "run-chatty"
	appendOne(t, db, run, "run", vocab.TypeRunCreated, vocab.RunCreated{RunID: run, Workflow: "w", Digest: "sha256:00", Mode: "run"})
	appendOne(t, db, run, "task/a/1", vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: "a", Attempt: 1, Server: "s", Tool: "x"})
	appendOne(t, db, run, "call/e1", vocab.TypeCallPrepared, vocab.CallPrepared{EffectID: "e1", TaskID: "a", Attempt: 1, Server: "s", Tool: "x", Idempotency: "pure"})
	appendOne(t, db, run, "call/e1", vocab.TypeCallTransition, vocab.CallTransition{EffectID: "e1", From: "prepared", To: "dispatched", Trigger: "dispatch"})
	frame := func(dir, kind, method string) events.Record {
		return events.Record{Stream: "call/e1", Type: vocab.FramePrefix + kind, Payload: vocab.Frame{Dir: dir, Kind: kind, Method: method,
			Remote: "s", Generation: 1, TaskID: "a", Attempt: 1, EffectID: "e1", Body: []byte(`{"progress":1}`)}}
	}
	var recs []events.Record
	for i := range n {
		recs = append(recs, frame("in", "notification", "notifications/progress"), frame("out", "request", "tasks/get"), frame("out", "resume", "tools/call"))
		if len(recs) >= 600 || i == n-1 {
			if _, err := db.Append(ctx, run, recs, projector.Apply); err != nil {
				t.Fatal(err)
			}
			recs = recs[:0]
		}
	}
	appendOne(t, db, run, "call/e1", vocab.TypeCallResult, vocab.CallResult{EffectID: "e1", ResultDigest: "sha256:01"})
	appendOne(t, db, run, "call/e1", vocab.TypeCallTransition, vocab.CallTransition{EffectID: "e1", From: "dispatched", To: "succeeded", Trigger: "succeed"})
	appendOne(t, db, run, "task/a/1", vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: "a", Attempt: 1, State: "succeeded"})
	appendOne(t, db, run, "run", vocab.TypeRunFinished, vocab.RunFinished{State: "succeeded"})
	r, err := Build(ctx, db, run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := Write(&page, r); err != nil {
		t.Fatal(err)
	}
	return page.String()
}

// TestReportBounded: ten times the progress notifications, polls and
// stream resumptions of one call leave the report the same size but for
// its counts and times: progress and polls are one band each with the
// count, single markers stop at maxPoints (the count goes on), and the
// stream events are capped per attempt as inspect caps them.
func TestReportBounded(t *testing.T) {
	small, large := chattyCallPage(t, 400), chattyCallPage(t, 4000)
	if d := len(large) - len(small); d > 4096 || d < -4096 {
		t.Errorf("the report of 4000×3 frames is %d bytes, of 400×3 %d: it grows with the frames", len(large), len(small))
	}
	for _, c := range []struct {
		class string
		want  int
	}{{`class="m m-progress"`, 1}, {`class="m m-poll"`, 1}, {`class="m m-resumed"`, maxPoints}} {
		if got := strings.Count(large, c.class); got != c.want {
			t.Errorf("%d shapes of %s, want %d", got, c.class, c.want)
		}
	}
	for _, want := range []string{"progress ×4000", "task polls ×4000", "3984 more not drawn"} {
		if !strings.Contains(large, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	t.Logf("report of a call with 3×400 frames: %d bytes; with 3×4000: %d bytes", len(small), len(large))
}
