package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// boundedTaskWorkflow is taskWorkflow with more keys on the remote
// (serverExtra, e.g. "maxSeconds: 1"), the action and the task.
func boundedTaskWorkflow(url, idem, serverExtra, actionExtra, taskExtra string) string {
	join := func(s string) string {
		if s == "" {
			return ""
		}
		return ", " + s
	}
	task := ""
	if taskExtra != "" {
		task = "\n      " + taskExtra
	}
	return fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: task-bounds}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30, headers: {authorization: {env: TOKEN}}%s}
  actions:
    act: {kind: mcp.call, idempotency: %s%s}
  tasks:
    - id: only
      uses: action:act%s
      with: {server: local, tool: research, arguments: {topic: x}}
  outputs:
    result: ${{ tasks.only.output }}
`, url, join(serverExtra), idem, join(actionExtra), task)
}

// runBounded runs src with TOKEN set to token.
func runBounded(t *testing.T, db *events.DB, src, token string) *workflow.Result {
	t.Helper()
	r := &workflow.Runner{DB: db, Getenv: func(string) string { return token }}
	res, err := r.Run(context.Background(), mustParse(t, src), nil, workflow.RunOptions{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// taskStatuses decodes the run's call.task_status events.
func taskStatuses(t *testing.T, db *events.DB, runID string) []vocab.CallTaskStatus {
	t.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []vocab.CallTaskStatus
	for _, e := range evs {
		if e.Type == vocab.TypeCallTaskStatus {
			var p vocab.CallTaskStatus
			if err := e.Decode(&p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// assertReplaysAlike replays runID and checks the replay ends the same
// way with the same inspect document, without a request to srv.
func assertReplaysAlike(t *testing.T, db *events.DB, srv *mcptest.Server, src *workflow.Result) {
	t.Helper()
	before := len(srv.Stats().Requests)
	rep := replayOf(t, db, src.RunID)
	if rep.State != src.State || rep.ExitCode != src.ExitCode {
		t.Fatalf("replay = %s (exit %d) %v; source = %s (exit %d) %v", rep.State, rep.ExitCode, rep.Err, src.State, src.ExitCode, src.Err)
	}
	want, _ := normalInspect(t, db, src.RunID)
	if got, _ := normalInspect(t, db, rep.RunID); got != want {
		t.Fatalf("inspect of replay differs from the source's:\n--- replay\n%s\n--- source\n%s", got, want)
	}
	if n := len(srv.Stats().Requests); n != before {
		t.Fatalf("the server saw %d requests during the replay", n-before)
	}
}

// TestTaskCall_NeverEndingTaskEndsAtBound: a task that stays working
// forever ends at the task call's bound — the server's maxSeconds, or its
// ttl plus the grace (1 s) — with a tasks/cancel the server saw, and the
// call uncertain (exit 3: it may have run), the reason naming the bound.
// The replay ends the same way from the log.
func TestTaskCall_NeverEndingTaskEndsAtBound(t *testing.T) {
	for _, tc := range []struct {
		name, server, action, reason string
	}{
		{name: "maxSeconds", server: "maxSeconds: 1", reason: "mcpServers.local.maxSeconds (1s)"},
		{name: "server ttl", action: "taskTtlSeconds: 1", reason: "the server's task ttl (1s) plus 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1 << 30, PollInterval: 10}}, researchTool(nil))
			db := openDB(t)
			res := runBounded(t, db, boundedTaskWorkflow(srv.URL, "at_most_once", tc.server, tc.action, ""), "Bearer s3cret-token")
			if res.ExitCode != workflow.ExitUncertain || res.State != workflow.StateUncertain || res.Err == nil ||
				!strings.Contains(res.Err.Error(), workflow.ReasonTaskDeadline+": "+tc.reason) {
				t.Fatalf("run = %s (exit %d) %v; want uncertain (exit 3) naming %q", res.State, res.ExitCode, res.Err, tc.reason)
			}
			st, ts := srv.Stats(), srv.TaskStats()
			if st.Executed["research"] != 1 || ts.Cancels != 1 || ts.Results != 0 {
				t.Fatalf("server saw executed %d, tasks %+v; want one tasks/cancel", st.Executed["research"], ts)
			}
			doc := inspectDoc(t, db, res.RunID)
			c := doc.ProtocolCalls[0]
			if c.Status != "uncertain" || c.Task == nil || c.Task.Cancel == nil || c.Task.Cancel.Cause != "timeout" || !c.Task.Cancel.Confirmed {
				b, _ := json.Marshal(c)
				t.Fatalf("call = %s", b)
			}
			assertReplaysAlike(t, db, srv, res)
		})
	}
}

// TestTaskCall_TimeoutSecondsEndsUncertain: a task's timeoutSeconds that
// ends a task call is not the operator's Ctrl-C: the call ends uncertain
// (exit 3, not 130) with a reason naming the timeout, after tasks/cancel.
func TestTaskCall_TimeoutSecondsEndsUncertain(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1 << 30, PollInterval: 10}}, researchTool(nil))
	db := openDB(t)
	res := runBounded(t, db, boundedTaskWorkflow(srv.URL, "idempotent", "", "", "timeoutSeconds: 1"), "Bearer s3cret-token")
	if res.ExitCode != workflow.ExitUncertain || res.State != workflow.StateUncertain || res.Err == nil ||
		!strings.Contains(res.Err.Error(), workflow.ReasonTaskDeadline+": task only timeoutSeconds (1s) reached") {
		t.Fatalf("run = %s (exit %d) %v; want uncertain (exit 3) naming timeoutSeconds", res.State, res.ExitCode, res.Err)
	}
	if ts := srv.TaskStats(); ts.Cancels != 1 || srv.Stats().Executed["research"] != 1 {
		t.Fatalf("tasks %+v, executed %d; want one tasks/cancel, one execution", ts, srv.Stats().Executed["research"])
	}
	if got := runMoves(t, db, res.RunID); got[len(got)-1].From != "cancelling" || got[len(got)-1].To != "uncertain" {
		t.Fatalf("transitions: %v", got)
	}
	assertReplaysAlike(t, db, srv, res)
}

// TestTaskCall_StatusRecordsBounded: a task whose statusMessage changes on
// every poll records at most 64 call.task_status events; the changes
// beyond them are counted (Folded, inspect's folded), never dropped
// silently; with long messages the bound on their bytes comes first, and
// the poll frames kept stop at their own bound (framesOmitted). The
// replay shows the same statuses, counts and frames.
func TestTaskCall_StatusRecordsBounded(t *testing.T) {
	for _, tc := range []struct {
		name       string
		polls      int
		msg        func(int) string
		maxRecords int
		omitted    bool
	}{
		{name: "count", polls: 100, msg: func(n int) string { return fmt.Sprintf("step %d", n) }, maxRecords: 64},
		{name: "bytes", polls: 40, msg: func(n int) string { return fmt.Sprintf("%0900d", n) }, maxRecords: 19},
		{name: "frames", polls: 30, msg: func(n int) string { return fmt.Sprint(n, strings.Repeat(" ", 100<<10)) }, maxRecords: 19, omitted: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: tc.polls, PollInterval: 10, StatusMessage: tc.msg}}, researchTool(nil))
			db := openDB(t)
			res := runBounded(t, db, boundedTaskWorkflow(srv.URL, "at_most_once", "", "", ""), "Bearer s3cret-token")
			if res.ExitCode != workflow.ExitOK {
				t.Fatalf("run = %s (exit %d) %v", res.State, res.ExitCode, res.Err)
			}
			sts := taskStatuses(t, db, res.RunID)
			folded, omitted := 0, false
			for _, s := range sts {
				folded += s.Folded
				omitted = omitted || s.FramesOmitted
			}
			// Every poll changed the status: polls working ones, then completed.
			if len(sts) > tc.maxRecords || len(sts)+folded != tc.polls+1 || folded == 0 || sts[len(sts)-1].Status != "completed" || omitted != tc.omitted {
				t.Fatalf("%d records (max %d), %d folded, omitted %v; want %d changes in all", len(sts), tc.maxRecords, folded, omitted, tc.polls+1)
			}
			frameBytes := 0
			evs, _ := db.Events(context.Background(), res.RunID)
			for _, e := range evs {
				if f, err := vocab.DecodeFrame(e); err == nil && e.Type != "" && strings.HasPrefix(e.Type, vocab.FramePrefix) && f.Method == "tasks/get" {
					frameBytes += len(f.Body)
				}
			}
			if frameBytes > 1<<20+200<<10 {
				t.Fatalf("%d bytes of tasks/get frames kept", frameBytes)
			}
			task := inspectDoc(t, db, res.RunID).ProtocolCalls[0].Task
			if task == nil || task.Folded != folded || task.Polls != tc.polls+1 {
				b, _ := json.Marshal(task)
				t.Fatalf("inspect task = %s", b)
			}
			assertReplaysAlike(t, db, srv, res)
		})
	}
}

// TestTaskCall_ResultOfAnotherTask: a tasks/result whose _meta
// related-task names another task is a protocol error, never the call's
// output: after asking again (bounded) the call ends uncertain, as a
// malformed answer after the tool may have run.
func TestTaskCall_ResultOfAnotherTask(t *testing.T) {
	h := func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return &mcptest.Result{Raw: json.RawMessage(`{"content":[],"structuredContent":{"n":7},` +
			`"_meta":{"io.modelcontextprotocol/related-task":{"taskId":"mcptest-task-99"}}}`)}, nil
	}
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 10}}, researchTool(h))
	db := openDB(t)
	res := runBounded(t, db, boundedTaskWorkflow(srv.URL, "at_most_once", "", "", ""), "Bearer s3cret-token")
	if res.ExitCode != workflow.ExitUncertain || res.Outputs["result"] != nil || res.Err == nil || !strings.Contains(res.Err.Error(), "related-task") {
		t.Fatalf("run = %s (exit %d) %v %v; want uncertain, no output", res.State, res.ExitCode, res.Outputs, res.Err)
	}
	if n := len(only(describeRun(t, db, res.RunID), "call.result")); n != 0 || srv.Stats().Executed["research"] != 1 || srv.TaskStats().Results == 0 {
		t.Fatalf("%d call.result, executed %d, tasks %+v", n, srv.Stats().Executed["research"], srv.TaskStats())
	}
	assertReplaysAlike(t, db, srv, res)
}

// TestTaskCall_MalformedPollInterval: a task answer whose pollInterval is
// not a number is still a valid task: the suggestion is ignored (the
// default interval), the call succeeds.
func TestTaskCall_MalformedPollInterval(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, RawPollInterval: json.RawMessage(`"soon"`)}}, researchTool(nil))
	db := openDB(t)
	res := runBounded(t, db, boundedTaskWorkflow(srv.URL, "at_most_once", "", "", ""), "Bearer s3cret-token")
	if res.ExitCode != workflow.ExitOK || srv.TaskStats().Gets != 2 || srv.Stats().Calls["research"] != 1 {
		t.Fatalf("run = %s (exit %d) %v, tasks %+v", res.State, res.ExitCode, res.Err, srv.TaskStats())
	}
}

// TestTaskCall_TaskIDHoldingSecret: a task id equal to a secret value is
// redacted like any remote string: no event payload holds it, and the
// call still polls the task by its real id and succeeds.
func TestTaskCall_TaskIDHoldingSecret(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 2, PollInterval: 10}}, researchTool(nil))
	db := openDB(t)
	const secret = "mcptest-task-1" // the id mcptest gives its first task
	res := runBounded(t, db, boundedTaskWorkflow(srv.URL, "at_most_once", "", "", ""), secret)
	if res.ExitCode != workflow.ExitOK || srv.TaskStats().Results != 1 {
		t.Fatalf("run = %s (exit %d) %v, tasks %+v", res.State, res.ExitCode, res.Err, srv.TaskStats())
	}
	evs, err := db.Events(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		if strings.Contains(e.Payload, secret) {
			t.Errorf("%s (seq %d) holds the secret task id: %s", e.Type, e.Seq, e.Payload)
		}
	}
	if task := inspectDoc(t, db, res.RunID).ProtocolCalls[0].Task; task == nil || strings.Contains(task.TaskID, secret) {
		t.Errorf("inspect task = %+v", task)
	}
}
