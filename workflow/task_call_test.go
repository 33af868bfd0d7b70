package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// taskWorkflow is one task calling tool on url through an action of class
// idem; actionExtra adds keys to the action ("task: true").
func taskWorkflow(url, tool, idem, actionExtra string) string {
	if actionExtra != "" {
		actionExtra = ", " + actionExtra
	}
	return fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: task-call}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    act: {kind: mcp.call, idempotency: %s%s}
  tasks:
    - id: only
      uses: action:act
      with: {server: local, tool: %s, arguments: {topic: x}}
  outputs:
    result: ${{ tasks.only.output }}
`, url, idem, actionExtra, tool)
}

var required = json.RawMessage(`{"taskSupport":"required"}`)

// researchTool is a task-required tool answering structured {n: 42}.
func researchTool(h mcptest.Handler) mcptest.ToolDef {
	if h == nil {
		h = func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: []map[string]any{{"type": "text", "text": "42"}}, StructuredContent: map[string]any{"n": 42}}, nil
		}
	}
	return mcptest.ToolDef{Name: "research", Execution: required, Handler: h,
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)}
}

// runTask runs src with obs observing every committed event.
func runTask(t *testing.T, db *events.DB, src string, obs func(events.Event)) *workflow.Result {
	t.Helper()
	res, err := (&workflow.Runner{DB: db, Observe: obs}).Run(context.Background(), mustParse(t, src), nil, workflow.RunOptions{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

// only returns the described events of the types given, in order.
func only(lines []string, prefixes ...string) []string {
	var out []string
	for _, l := range lines {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func TestTaskCall_CompletesAfterPolls(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 3, PollInterval: 10}}, researchTool(nil))
	db := openDB(t)
	res := runTask(t, db, taskWorkflow(srv.URL, "research", "at_most_once", ""), nil)
	if res.Err != nil || res.State != workflow.StateSucceeded {
		t.Fatalf("run: %s %v", res.State, res.Err)
	}
	if got := fmt.Sprint(res.Outputs["result"]); got != "map[n:42]" {
		t.Fatalf("output = %v", res.Outputs)
	}
	st, ts := srv.Stats(), srv.TaskStats()
	if st.Calls["research"] != 1 || ts.Created != 1 || ts.Gets != 4 || ts.Results != 1 || ts.Cancels != 0 {
		t.Fatalf("server saw calls %d, tasks %+v", st.Calls["research"], ts)
	}
	lines := describeRun(t, db, res.RunID)
	want := []string{
		"call.prepared",
		"mcp.request out tools/call prepared->dispatched",
		"call.task_accepted dispatched->accepted",
		"mcp.response in accepted->polling", // the first poll's answer: working
		"call.task_status",
		"call.result polling->succeeded",
	}
	if got := only(lines, "call.", "mcp.request out tools/call", "mcp.response in accepted"); !slices.Equal(got, want) {
		t.Fatalf("call events:\n%s", strings.Join(got, "\n"))
	}
	// Four polls, but only the two that changed something left frames: the
	// first (working: accepted → polling) and the last (completed).
	if n := strings.Count(strings.Join(lines, "\n"), "mcp.request out tasks/get"); n != 2 {
		t.Fatalf("tasks/get frames recorded = %d, want 2 (identical polls folded)\n%s", n, strings.Join(lines, "\n"))
	}
	doc, err := projector.Inspect(context.Background(), db, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	task := doc.ProtocolCalls[0].Task
	if task == nil || task.TaskID != "mcptest-task-1" || task.Polls != 4 || len(task.History) != 2 ||
		task.History[0].Status != "working" || task.History[1].Status != "completed" || task.History[1].Poll != 4 || task.History[0].Polls != 3 {
		b, _ := json.Marshal(task)
		t.Fatalf("inspect task = %s", b)
	}
	if doc.ProtocolCalls[0].Status != "succeeded" {
		t.Fatalf("call status = %s", doc.ProtocolCalls[0].Status)
	}
}

func TestTaskCall_PollIntervalHonoured(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 3, PollInterval: 60}}, researchTool(nil))
	res := runTask(t, openDB(t), taskWorkflow(srv.URL, "research", "pure", ""), nil)
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	ts := srv.TaskStats()
	times := ts.PollTimes["mcptest-task-1"]
	prev := ts.CreatedAt["mcptest-task-1"]
	for i, at := range times {
		if gap := at.Sub(prev); gap.Milliseconds() < 55 {
			t.Fatalf("poll %d came %v after the previous step; pollInterval is 60ms", i+1, gap)
		}
		prev = at
	}
}

func TestTaskCall_OptionalToolUsesTaskOnlyWhenAsked(t *testing.T) {
	tool := researchTool(nil)
	tool.Execution = json.RawMessage(`{"taskSupport":"optional"}`)
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{}}, tool)
	db := openDB(t)
	if res := runTask(t, db, taskWorkflow(srv.URL, "research", "pure", ""), nil); res.Err != nil {
		t.Fatal(res.Err)
	}
	if ts := srv.TaskStats(); ts.Created != 0 {
		t.Fatalf("a task was created without task: true: %+v", ts)
	}
	if res := runTask(t, db, taskWorkflow(srv.URL, "research", "pure", "task: true, taskTtlSeconds: 60"), nil); res.Err != nil {
		t.Fatal(res.Err)
	}
	if ts := srv.TaskStats(); ts.Created != 1 {
		t.Fatalf("task: true made %d tasks", ts.Created)
	}
}

func TestTaskCall_RequiredWithoutServerSupportRefused(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, researchTool(nil)) // no tasks capability
	res := runTask(t, openDB(t), taskWorkflow(srv.URL, "research", "pure", ""), nil)
	if res.ExitCode != workflow.ExitFailed || !strings.Contains(res.Err.Error(), "does not advertise tasks") {
		t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
	}
	if n := srv.Stats().Calls["research"]; n != 0 {
		t.Fatalf("tools/call sent %d times", n)
	}
}

func TestTaskCall_Outcomes(t *testing.T) {
	tests := []struct {
		name    string
		handler mcptest.Handler
		exit    int
		state   string // the call's final state
		want    string // in the error
		cancels int
	}{
		{"failed", func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, errors.New("no sources")
		}, workflow.ExitFailed, "failed", "returned isError", 0},
		{"cancelled by server", func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
			mcptest.SetTaskStatus(ctx, mcptest.TaskCancelled, "stopped by an operator")
			return &mcptest.Result{}, nil
		}, workflow.ExitFailed, "failed", "cancelled by the server: stopped by an operator", 0},
		{"input required", func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
			mcptest.SetTaskStatus(ctx, mcptest.TaskInputRequired, "which topic?")
			return &mcptest.Result{}, nil
		}, workflow.ExitUncertain, "uncertain", "input_required: task mcptest-task-1 asked for input agentctl does not offer: which topic?", 1},
		// The task ran and its result is unusable: at_most_once ends
		// uncertain (a retry or --retry-failed would run it again).
		{"output violates schema", func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: []map[string]any{}, StructuredContent: map[string]any{"n": "many"}}, nil
		}, workflow.ExitUncertain, "uncertain", "may have executed", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 10}}, researchTool(tc.handler))
			db := openDB(t)
			res := runTask(t, db, taskWorkflow(srv.URL, "research", "at_most_once", ""), nil)
			if res.ExitCode != tc.exit || res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
			}
			doc, err := projector.Inspect(context.Background(), db, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if got := doc.ProtocolCalls[0].Status; got != tc.state {
				t.Fatalf("call status %s, want %s", got, tc.state)
			}
			if ts := srv.TaskStats(); ts.Cancels != tc.cancels || srv.Stats().Calls["research"] != 1 {
				t.Fatalf("server: %+v, calls %d", ts, srv.Stats().Calls["research"])
			}
		})
	}
}

// TestTaskCall_Lost: the server forgets the task (expired) or the session
// it lives in (404) while the call polls. at_most_once ends uncertain
// (task_lost) without a second tools/call; idempotent is sent once more, as
// a new task, on a new session.
func TestTaskCall_Lost(t *testing.T) {
	for _, tc := range []struct {
		name, idem string
		how        string
		exit       int
		calls      int
	}{
		{"expired at_most_once", "at_most_once", "expire", workflow.ExitUncertain, 1},
		{"expired idempotent", "idempotent", "expire", workflow.ExitOK, 2},
		{"session 404 at_most_once", "at_most_once", "404", workflow.ExitUncertain, 1},
		{"session 404 keyed", "keyed", "404", workflow.ExitOK, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 10}}, researchTool(nil))
			if tc.how == "404" {
				srv.Inject(mcptest.Fault{RPCMethod: "tasks/get", Nth: 1, Status: http.StatusNotFound})
			}
			expired := false
			obs := func(e events.Event) {
				if tc.how == "expire" && !expired && e.Type == vocab.TypeCallTaskAccepted {
					expired = true
					srv.ExpireTasks() // after the task is on disk, before the first tasks/get
				}
			}
			db := openDB(t)
			res := runTask(t, db, taskWorkflow(srv.URL, "research", tc.idem, ""), obs)
			if res.ExitCode != tc.exit {
				t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
			}
			if tc.exit == workflow.ExitUncertain && !strings.Contains(res.Err.Error(), "task_lost") {
				t.Fatalf("error %v lacks task_lost", res.Err)
			}
			if st := srv.Stats(); st.Executed["research"] != tc.calls || st.Calls["research"] != tc.calls {
				t.Fatalf("server executed %d, calls %d; want %d", st.Executed["research"], st.Calls["research"], tc.calls)
			}
		})
	}
}

// TestTaskCall_URLElicitation: -32042 ends the call uncertain and names
// the hosts (sanitised), not the URLs.
func TestTaskCall_URLElicitation(t *testing.T) {
	tool := mcptest.ToolDef{Name: "pay", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return nil, &mcptest.RPCError{Code: -32042, Message: "authorize first",
			Data: json.RawMessage(`{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://Pay.Example.com/authorize?state=x","message":"go"}]}`)}
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	res := runTask(t, openDB(t), taskWorkflow(srv.URL, "pay", "at_most_once", ""), nil)
	if res.ExitCode != workflow.ExitUncertain {
		t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
	}
	msg := res.Err.Error()
	if !strings.Contains(msg, "url_elicitation_required") || !strings.Contains(msg, "pay.example.com") || strings.Contains(msg, "authorize?state") {
		t.Fatalf("error: %s", msg)
	}
}

// TestTaskCall_CancelSendsTasksCancel: a cancel (SIGINT) while the task
// runs sends tasks/cancel, recorded; the call is cancelled when the server
// confirms, uncertain when it cannot be asked.
func TestTaskCall_CancelSendsTasksCancel(t *testing.T) {
	for _, tc := range []struct {
		name   string
		fault  bool
		state  string
		cancel string // the call.task_cancel's confirmation
	}{
		{"confirmed", false, "cancelled", `"confirmed":true`},
		{"unconfirmed", true, "uncertain", `"confirmed":false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1000, PollInterval: 10}}, researchTool(nil))
			if tc.fault {
				srv.Inject(mcptest.Fault{RPCMethod: "tasks/cancel", Nth: 1, Status: http.StatusInternalServerError})
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			db := openDB(t)
			obs := func(e events.Event) {
				if strings.HasSuffix(projector.Describe(e), "->polling") { // the first poll found it working
					cancel() // the user's ^C while the task is working
				}
			}
			res, err := (&workflow.Runner{DB: db, Observe: obs}).Run(ctx, mustParse(t, taskWorkflow(srv.URL, "research", "at_most_once", "")), nil, workflow.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != workflow.ExitCancelled {
				t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
			}
			n := 0
			for _, r := range srv.Stats().Requests {
				if r.RPCMethod == "tasks/cancel" {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("tasks/cancel sent %d times", n)
			}
			doc, err := projector.Inspect(context.Background(), db, res.RunID)
			if err != nil {
				t.Fatal(err)
			}
			call := doc.ProtocolCalls[0]
			b, _ := json.Marshal(call.Task)
			if call.Status != tc.state || call.Task == nil || call.Task.Cancel == nil || !strings.Contains(string(b), tc.cancel) {
				t.Fatalf("call %s, task %s", call.Status, b)
			}
		})
	}
}

// TestTaskCall_ReplayWithoutNetwork: a run whose call was an MCP task
// replays from the log with the server gone and every socket forbidden:
// the same outcome and output, the task's CreateTaskResult, polls and
// tasks/result answered from the recorded frames (TestReplay_TaskCalls
// covers every way a task call ends).
func TestTaskCall_ReplayWithoutNetwork(t *testing.T) {
	srv := mcptest.NewServer(mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 10}}, researchTool(nil))
	db := openDB(t)
	src := runTask(t, db, taskWorkflow(srv.URL, "research", "pure", ""), nil)
	if src.Err != nil {
		t.Fatal(src.Err)
	}
	srv.Close()
	blockNetwork(t, srv.URL)
	rep := replayOf(t, db, src.RunID)
	if rep.ExitCode != workflow.ExitOK || rep.Err != nil || fmt.Sprint(rep.Outputs["result"]) != "map[n:42]" {
		t.Fatalf("replay exit %d: %v, outputs %v", rep.ExitCode, rep.Err, rep.Outputs)
	}
	want := []string{"call.prepared", "replay.frames call prepared->dispatched", "call.task_accepted dispatched->accepted",
		"replay.frames call accepted->polling", "call.task_status", "call.result polling->succeeded"}
	if got := only(describeRun(t, db, rep.RunID), "call.", "replay.frames call "); !slices.Equal(got, want) {
		t.Fatalf("replay call events:\n%s", strings.Join(got, "\n"))
	}
}
