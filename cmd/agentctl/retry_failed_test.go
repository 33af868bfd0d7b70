package main

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_ResumeRetryFailed: a run whose second task failed definitively
// (the tool said isError) and whose third was skipped is refused by a plain
// resume, which prints the --retry-failed command; that command, run as
// printed, gives the failed task a new attempt and runs the skipped one,
// while the succeeded task is not called again (server-side counts); its
// replay ends succeeded too, the new attempt included.
func TestCLI_ResumeRetryFailed(t *testing.T) {
	var flaky atomic.Int32
	srv := mcptest.Start(t, mcptest.Options{},
		mcptest.ToolDef{Name: "first"},
		mcptest.ToolDef{Name: "flaky", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			if flaky.Add(1) == 1 {
				return nil, errors.New("backend not ready")
			}
			return &mcptest.Result{Content: mcptest.Text("ready")}, nil
		}},
		mcptest.ToolDef{Name: "last"},
	)
	tasks := []testkit.Task{
		{ID: "a", Idempotency: "idempotent", Tool: "first"},
		{ID: "b", Idempotency: "at_most_once", Tool: "flaky"},
		{ID: "c", Idempotency: "pure", Tool: "last"},
	}
	wf := testkit.Workflow{URL: srv.URL, Tasks: tasks, Outputs: []testkit.Output{{Name: "b", Value: "${{ tasks.b.output[0].text }}"}}}.WriteFile(t)
	db := filepath.Join(t.TempDir(), "a.db")
	t.Setenv("AGENTCTL_DB", db)
	_, stderr, code := cli(t, "run", wf)
	if code != 4 {
		t.Fatalf("run: exit %d, want 4\n%s", code, stderr)
	}
	runID := runIDs(t, db)[0]
	_, stderr, code = cli(t, "resume", runID)
	hint := "agentctl resume " + runID + " --retry-failed"
	if code != 2 || !strings.Contains(stderr, hint) {
		t.Fatalf("plain resume of a failed run: exit %d, want 2 with %q\n%s", code, hint, stderr)
	}
	out, stderr, code := runHint(t, hint, "")
	if code != 0 || !strings.Contains(out, "b: ready") {
		t.Fatalf("%s: exit %d\n%s\n%s", hint, code, out, stderr)
	}
	st := srv.Stats()
	if st.Calls["first"] != 1 || st.Calls["flaky"] != 2 || st.Calls["last"] != 1 {
		t.Fatalf("server saw first %d, flaky %d, last %d calls; want 1, 2, 1", st.Calls["first"], st.Calls["flaky"], st.Calls["last"])
	}
	got := strings.Join(describe(t, db, runID), "\n")
	if !strings.Contains(got, "run.finished failed\nrun.resumed\ntask.started b\n") || strings.Count(got, "task.started b\n") != 2 ||
		strings.Count(got, "task.started a\n") != 1 || !strings.HasSuffix(got, "task.finished c succeeded\nrun.finished succeeded") {
		t.Errorf("log:\n%s", got)
	}
	// Finished and succeeded: nothing more to do, with or without the flag.
	for _, args := range [][]string{{"resume", runID}, {"resume", runID, "--retry-failed"}} {
		if _, stderr, code := cli(t, args...); code != 2 || !strings.Contains(stderr, "nothing to resume") {
			t.Fatalf("%v of a succeeded run: exit %d\n%s", args, code, stderr)
		}
	}
	if n := srv.Stats().Calls["flaky"]; n != 2 {
		t.Fatalf("refused resumes sent calls: flaky %d", n)
	}
	// The replay reproduces the resumed run's outcome, the new attempt
	// included, with no request to the server.
	before := len(srv.Stats().Requests)
	out, stderr, code = cli(t, "replay", runID)
	if code != 0 || !strings.Contains(out, "b: ready") || len(srv.Stats().Requests) != before {
		t.Fatalf("replay of the run resumed with --retry-failed: exit %d, %d requests\n%s\n%s", code, len(srv.Stats().Requests)-before, out, stderr)
	}
}
