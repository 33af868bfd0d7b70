package report

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
)

func TestTickStep(t *testing.T) {
	for _, c := range []struct {
		span time.Duration
		want time.Duration
	}{
		{time.Millisecond, 200 * time.Microsecond},
		{46 * time.Millisecond, 10 * time.Millisecond},
		{80 * time.Millisecond, 10 * time.Millisecond},
		{81 * time.Millisecond, 20 * time.Millisecond},
		{3 * time.Second, 500 * time.Millisecond},
		{90 * time.Second, 20 * time.Second},
		{2 * time.Hour, 1000 * time.Second},
	} {
		got := tickStep(c.span, 8)
		if got != c.want {
			t.Errorf("tickStep(%v) = %v, want %v", c.span, got, c.want)
		}
		if n := c.span / got; n > 8 {
			t.Errorf("tickStep(%v) gives %d ticks, more than 8", c.span, n)
		}
	}
	for _, c := range []struct {
		d, step time.Duration
		want    string
	}{
		{0, time.Millisecond, "0"},
		{1500 * time.Microsecond, 500 * time.Microsecond, "1.5ms"},
		{400 * time.Microsecond, 200 * time.Microsecond, "0.4ms"},
		{40 * time.Microsecond, 20 * time.Microsecond, "40µs"},
		{2500 * time.Millisecond, 500 * time.Millisecond, "2.5s"},
		{200 * time.Second, 100 * time.Second, "3m20s"},
	} {
		if got := tickLabel(c.d, c.step); got != c.want {
			t.Errorf("tickLabel(%v, %v) = %q, want %q", c.d, c.step, got, c.want)
		}
	}
}

// appendOne appends one event to run, each in its own transaction so each
// gets its own (later) created_at.
func appendOne(t *testing.T, db *events.DB, run, stream, typ string, payload any) {
	t.Helper()
	if _, err := db.Append(context.Background(), run, []events.Record{{Stream: stream, Type: typ, Payload: payload}}, projector.Apply); err != nil {
		t.Fatalf("append %s: %v", typ, err)
	}
}

// TestBuildOverlapSkipRetryUnknown: tasks that overlap get a lane each with
// their bars where they ran; a retry scheduled and a skipped task are
// drawn; a type the report does not know is passed over; the page renders.
// On SQLite and PostgreSQL.
func TestBuildOverlapSkipRetryUnknown(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		testBuildOverlapSkipRetryUnknown(t, b.Open(t, events.Options{Durability: events.DurabilityNormal}))
	})
}

func testBuildOverlapSkipRetryUnknown(t *testing.T, db *events.DB) {
	const run = "run-synthetic"
	appendOne(t, db, run, "run", vocab.TypeRunCreated, vocab.RunCreated{RunID: run, Workflow: "w", Digest: "sha256:00", Mode: "run"})
	appendOne(t, db, run, "task/a/1", vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: "a", Attempt: 1, Server: "s", Tool: "x"})
	appendOne(t, db, run, "task/b/1", vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: "b", Attempt: 1, Server: "s", Tool: "y"})
	appendOne(t, db, run, "task/a/1", vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: "a", Attempt: 1, State: "failed", Error: "boom"})
	appendOne(t, db, run, "task/a", vocab.TypeTaskRetry, map[string]any{"taskId": "a", "attempt": 2, "reason": "backoff 1s"})
	appendOne(t, db, run, "future", "future.kind", map[string]any{"anything": []int{1, 2}})
	appendOne(t, db, run, "task/a/2", vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: "a", Attempt: 2, Server: "s", Tool: "x"})
	appendOne(t, db, run, "task/b/1", vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: "b", Attempt: 1, State: "succeeded"})
	appendOne(t, db, run, "task/c", vocab.TypeTaskSkipped, map[string]any{"taskId": "c", "reason": "a failed"})
	appendOne(t, db, run, "task/a/2", vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: "a", Attempt: 2, State: "succeeded"})
	appendOne(t, db, run, "run", vocab.TypeRunFinished, vocab.RunFinished{State: "succeeded"})

	r, err := Build(context.Background(), db, run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Chain.Verified || r.Chain.Events != 11 {
		t.Errorf("chain %+v, want 11 events verified", r.Chain)
	}
	var lanes []string
	for _, l := range r.Lanes {
		lanes = append(lanes, l.TaskID)
	}
	if strings.Join(lanes, ",") != "a,b,c" {
		t.Fatalf("lanes %v, want a,b,c", lanes)
	}
	a, b, c := r.Lanes[0], r.Lanes[1], r.Lanes[2]
	if len(a.Attempts) != 2 || a.Attempts[0].State != "failed" || a.Attempts[1].State != "succeeded" || len(b.Attempts) != 1 {
		t.Fatalf("attempts a %+v b %+v", a.Attempts, b.Attempts)
	}
	// b started before a's first attempt ended: they overlap.
	if !b.Attempts[0].Start.Before(a.Attempts[0].End) || !a.Attempts[0].Start.Before(b.Attempts[0].Start) {
		t.Errorf("a1 %v–%v and b1 %v–%v do not overlap", a.Attempts[0].Start, a.Attempts[0].End, b.Attempts[0].Start, b.Attempts[0].End)
	}
	if len(a.Marks) != 1 || a.Marks[0].Kind != "retry" || a.Marks[0].Detail != "backoff 1s" {
		t.Errorf("a marks %+v", a.Marks)
	}
	if len(c.Attempts) != 0 || len(c.Marks) != 1 || c.Marks[0].Kind != "skipped" {
		t.Errorf("c %+v", c)
	}
	tl := layout(r)
	if len(tl.Lanes) != 3 || len(tl.Lanes[0].Bars) != 2 || tl.Lanes[0].Bars[1].X < tl.Lanes[0].Bars[0].X || len(tl.Lanes[2].Skipped) != 1 {
		t.Errorf("layout lanes %+v", tl.Lanes)
	}
	if tl.Lanes[1].Bars[0].X >= tl.Lanes[0].Bars[0].X+tl.Lanes[0].Bars[0].W {
		t.Errorf("b's bar starts at %v, after a's first bar ends (%v)", tl.Lanes[1].Bars[0].X, tl.Lanes[0].Bars[0].X+tl.Lanes[0].Bars[0].W)
	}
	var page bytes.Buffer
	if err := Write(&page, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`data-task="c"`, `class="skip"`, `class="m m-retry"`, "backoff 1s", "a failed"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("page lacks %s", want)
		}
	}
}

// TestBuildLiveRun: a run still running (no finish events) draws its open
// attempt and call up to the last event committed.
// On SQLite and PostgreSQL.
func TestBuildLiveRun(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		testBuildLiveRun(t, b.Open(t, events.Options{Durability: events.DurabilityNormal}))
	})
}

func testBuildLiveRun(t *testing.T, db *events.DB) {
	const run = "run-live"
	appendOne(t, db, run, "run", vocab.TypeRunCreated, vocab.RunCreated{RunID: run, Workflow: "w", Digest: "sha256:00", Mode: "run"})
	appendOne(t, db, run, "task/a/1", vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: "a", Attempt: 1, Server: "s", Tool: "x"})
	appendOne(t, db, run, "call/e1", vocab.TypeCallPrepared, vocab.CallPrepared{EffectID: "e1", TaskID: "a", Attempt: 1, Server: "s", Tool: "x", Idempotency: "pure"})
	appendOne(t, db, run, "call/e1", vocab.TypeCallTransition, vocab.CallTransition{EffectID: "e1", From: "prepared", To: "dispatched", Trigger: "dispatch"})
	appendOne(t, db, run, "call/e1", vocab.FramePrefix+"notification", vocab.Frame{Dir: "in", Kind: "notification", Method: "notifications/progress", TaskID: "a", Attempt: 1, EffectID: "e1", Body: []byte(`{}`)})
	appendOne(t, db, run, "call/e1", vocab.FramePrefix+"notification", vocab.Frame{Dir: "in", Kind: "notification", Method: "notifications/progress", TaskID: "a", Attempt: 1, EffectID: "e1", Body: []byte(`{}`)})
	r, err := Build(context.Background(), db, run, Options{RedispatchBudget: func(string) int { return 1 }})
	if err != nil {
		t.Fatal(err)
	}
	at := r.Lanes[0].Attempts[0]
	if at.Finished || at.State != "running" || !at.End.Equal(r.End) || len(at.Calls) != 1 {
		t.Fatalf("attempt %+v", at)
	}
	c := at.Calls[0]
	if c.Status != "dispatched" || !c.End.Equal(r.End) || c.Marks[MarkProgress] == nil || c.Marks[MarkProgress].Count != 2 || c.BudgetText() != "of a budget of 1" {
		t.Fatalf("call %+v", c)
	}
	var page bytes.Buffer
	if err := Write(&page, r); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "not finished: what is committed so far") {
		t.Error("the page does not say the run is not finished")
	}
}
