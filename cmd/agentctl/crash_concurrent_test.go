package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// concurrentActTools are three copies of act, one per task, so that the
// server counts each task's executions apart.
func concurrentActTools() []mcptest.ToolDef {
	var tools []mcptest.ToolDef
	for i := range 3 {
		d := actTool()
		d.Name = fmt.Sprintf("a%d", i)
		tools = append(tools, d)
	}
	return tools
}

func concurrentActWorkflow(t *testing.T, url, idem string) string {
	t.Helper()
	action := map[string]string{"idempotent": "ok", "at_most_once": "amo"}[idem]
	var tasks []graphTask
	for i := range 3 {
		tasks = append(tasks, graphTask{id: fmt.Sprintf("t%d", i), tool: fmt.Sprintf("a%d", i), action: action, needs: none()})
	}
	return graphWorkflow(t, url, 3, tasks)
}

// TestCLI_CrashMatrixConcurrent kills a run of three concurrent tasks after
// every event of a reference run (each "Describe line#N": every
// interleaving has them all) and resumes it: every task is carried on by
// the resume rules, no at_most_once call runs twice (a redispatchable one
// at most twice), the chain verifies and rebuild == incremental.
func TestCLI_CrashMatrixConcurrent(t *testing.T) {
	t.Parallel()
	for _, idem := range []string{"idempotent", "at_most_once"} {
		t.Run(idem, func(t *testing.T) {
			t.Parallel()
			ref := mcptest.Start(t, mcptest.Options{}, concurrentActTools()...)
			refDB := filepath.Join(t.TempDir(), "ref.db")
			if _, stderr, code := cli(t, "run", concurrentActWorkflow(t, ref.URL, idem), "--db", refDB); code != 0 {
				t.Fatalf("reference run exit %d: %s", code, stderr)
			}
			ids := runIDs(t, refDB)
			var points []string
			lines := describeAll(logOf(t, refDB, ids[0]))
			for i, l := range lines {
				if l != "run.created" {
					points = append(points, pointName(lines, i))
				}
			}
			for _, point := range points {
				t.Run(strings.NewReplacer(" ", "_", "#", "@").Replace(point), func(t *testing.T) {
					t.Parallel()
					crashConcurrent(t, idem, point)
				})
			}
		})
	}
}

func crashConcurrent(t *testing.T, idem, point string) {
	srv := mcptest.Start(t, mcptest.Options{}, concurrentActTools()...)
	db := filepath.Join(t.TempDir(), "a.db")
	killedAt(t, point, "run", concurrentActWorkflow(t, srv.URL, idem), "--db", db, "--output", "json")
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs in log: %v", ids)
	}
	runID := ids[0]
	before := logOf(t, db, runID)
	code, _, stderr := resumeJSON(t, db, runID)
	after := assertSound(t, db, runID, before)
	lines := describeAll(after)
	limit := 1
	if isRedispatchable(idem) {
		limit = 2
	}
	for i := range 3 {
		if n := srv.Stats().Executed[fmt.Sprintf("a%d", i)]; n > limit {
			t.Fatalf("task t%d: %s tool executed %d times, at most %d allowed\n%s", i, idem, n, limit, strings.Join(lines, "\n"))
		}
	}
	if lines[len(before)-1] == "run.finished succeeded" {
		if code != 2 || len(after) != len(before) {
			t.Fatalf("resume of a finished run: exit %d; want 2 and nothing appended\n%s", code, stderr)
		}
		return
	}
	if code != 0 && code != 3 {
		t.Fatalf("resume exit %d\n%s\n%s", code, stderr, strings.Join(lines, "\n"))
	}
	if !slices.Contains(lines, "run.resumed") || !strings.HasPrefix(lines[len(lines)-1], "run.finished") {
		t.Fatalf("no run.resumed, or last event %q\n%s", lines[len(lines)-1], strings.Join(lines, "\n"))
	}
	// Every task ends once the resume is over: succeeded, or uncertain
	// (a call that was in flight when the process died, of a class that
	// may not be resent).
	for i := range 3 {
		id := fmt.Sprintf("t%d", i)
		if !slices.Contains(lines, "task.finished "+id+" succeeded") && !slices.Contains(lines, "task.finished "+id+" uncertain") {
			t.Fatalf("task %s did not end\n%s", id, strings.Join(lines, "\n"))
		}
	}
}

// TestCLI_RetryWaitSurvivesKill: the process is killed right after it
// recorded a retry's schedule; resume waits what is left of that wait (the
// next attempt starts no earlier than the recorded notBefore), records no
// second schedule, and makes the attempt.
func TestCLI_RetryWaitSurvivesKill(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	flaky := mcptest.ToolDef{Name: "flaky", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		mu.Lock()
		calls++
		n := calls
		mu.Unlock()
		if n == 1 {
			return nil, errors.New("not yet")
		}
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"ok": true}}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, flaky)
	wf := graphWorkflow(t, srv.URL, 1, []graphTask{{id: "try", tool: "flaky", action: "retrying"}})
	db := filepath.Join(t.TempDir(), "a.db")
	killedAt(t, vocab.TypeTaskRetry, "run", wf, "--db", db)
	runID := runIDs(t, db)[0]
	code, _, stderr := resumeJSON(t, db, runID)
	if code != 0 {
		t.Fatalf("resume exit %d: %s", code, stderr)
	}
	var notBefore time.Time
	var started []string
	for _, e := range logOf(t, db, runID) {
		switch e.Type {
		case vocab.TypeTaskRetry:
			var p vocab.TaskRetryScheduled
			if err := e.Decode(&p); err != nil || !notBefore.IsZero() {
				t.Fatalf("a second task.retry_scheduled (or undecodable): %v", err)
			}
			notBefore, _ = time.Parse(time.RFC3339Nano, p.NotBefore)
		case vocab.TypeTaskStarted:
			started = append(started, e.CreatedAt)
		}
	}
	if len(started) != 2 {
		t.Fatalf("%d attempts started, want 2", len(started))
	}
	at, _ := time.Parse(time.RFC3339Nano, started[1])
	if at.Before(notBefore) {
		t.Fatalf("attempt 2 started at %s, before the recorded notBefore %s", at, notBefore)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 2 {
		t.Fatalf("server saw %d calls, want 2", calls)
	}
}
