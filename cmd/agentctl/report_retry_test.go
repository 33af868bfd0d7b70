package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_ReportRetryAndSkip: a real run with a retry and a skipped task
// (flip fails once with isError and succeeds on its second attempt after
// the scheduled wait; boom fails; after, which needs boom, is skipped): the
// report draws flip's two attempts in order with the retry mark between
// them, and after's lane as a skipped box, and lists both in the tasks
// table.
func TestCLI_ReportRetryAndSkip(t *testing.T) {
	var flips atomic.Int32
	flip, boom, after := actTool(), actTool(), actTool()
	flip.Name, boom.Name, after.Name = "flip", "boom", "after"
	flip.Handler = func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		if flips.Add(1) == 1 {
			return nil, errors.New("not yet")
		}
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	boom.Handler = func(context.Context, *mcptest.Call) (*mcptest.Result, error) { return nil, errors.New("no such order") }
	srv := mcptest.Start(t, mcptest.Options{}, flip, boom, after)
	db := filepath.Join(t.TempDir(), "a.db")
	wf := graphWorkflow(t, srv.URL, 4, []graphTask{
		{id: "flip", tool: "flip", action: "retrying", needs: none()},
		{id: "boom", tool: "boom", needs: &[]string{"flip"}},
		{id: "after", tool: "after", needs: &[]string{"boom"}},
	})
	runID := runFor(t, 4, "run", wf, "--db", db)
	if got := srv.Stats().Calls; got["flip"] != 2 || got["boom"] != 1 || got["after"] != 0 {
		t.Fatalf("server saw tools/call %v, want flip twice, boom once, after never", got)
	}
	page := htmlReport(t, db, runID)
	order, bars := laneBars(t, page)
	if strings.Join(order, ",") != "flip,boom,after" {
		t.Errorf("lanes %v, want flip, boom, after", order)
	}
	if f := bars["flip"]; len(f) != 2 || f[0].state != "failed" || f[1].state != "succeeded" || f[1].start < f[0].end {
		t.Errorf("flip's bars %v, want a failed attempt, then a succeeded one after it", f)
	}
	if len(bars["after"]) != 0 {
		t.Errorf("after's bars %v, want none (skipped)", bars["after"])
	}
	lane := func(task string) string {
		_, g, _ := strings.Cut(page, `<g class="lane" data-task="`+task+`">`)
		g, _, _ = strings.Cut(g, "</g>")
		return g
	}
	if n := strings.Count(lane("flip"), `class="m m-retry"`); n != 1 {
		t.Errorf("%d retry marks on flip's lane, want 1", n)
	}
	if n := strings.Count(lane("after"), `<rect class="skip"`); n != 1 {
		t.Errorf("%d skipped boxes on after's lane, want 1", n)
	}
	shown := textOf(t, page)
	for _, want := range []string{"flip 1 local / flip failed", "flip 2 local / flip succeeded", "flip retry +", "after skipped +"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the tasks table lacks %q", want)
		}
	}
}

// TestCLI_ReportResumedRun: a run killed after its call was prepared and
// then resumed: written between the crash and the resume, the report shows
// the run unfinished and its attempt open; after, it draws the resume as a
// line across the lanes and the call's path to success.
func TestCLI_ReportResumedRun(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	db := filepath.Join(t.TempDir(), "a.db")
	runID := crashRun(t, db, actWorkflow(t, srv.URL, "idempotent"), "call.prepared")
	if shown := textOf(t, htmlReport(t, db, runID)); !strings.Contains(shown, "not finished: what is committed so far") || !strings.Contains(shown, "(open)") {
		t.Errorf("the report of the crashed run does not show it unfinished with its attempt open:\n%s", shown)
	}
	if _, stderr, code := cli(t, "resume", runID, "--db", db); code != 0 {
		t.Fatalf("resume: exit %d %s", code, stderr)
	}
	page := htmlReport(t, db, runID)
	if n := strings.Count(page, `<line class="runmark"`); n != 1 || !strings.Contains(page, `class="runmark-label"`) {
		t.Errorf("%d run.resumed lines in the timeline, want 1 with its label", n)
	}
	shown := textOf(t, page)
	for _, want := range []string{"resumed after running", "succeeded from ", "Outputs { \"result\": {"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the resumed run's report lacks %q:\n%s", want, shown)
		}
	}
}
