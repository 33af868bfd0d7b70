package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// modernTaskServer is a 2026-07-28 mcptest server serving tasks (the tasks
// extension) for the research tool.
func modernTaskServer(t *testing.T, opts mcptest.TaskOptions, h mcptest.Handler) *mcptest.Server {
	t.Helper()
	return mcptest.Start(t, mcptest.Options{ProtocolVersion: mcptest.Protocol20260728, Tasks: &opts}, researchTool(h))
}

// modernTaskWorkflow is taskWorkflow pinned to 2026-07-28.
func modernTaskWorkflow(url, idem, actionExtra string) string {
	return strings.Replace(taskWorkflow(url, "research", idem, actionExtra), "timeoutSeconds: 30}", "timeoutSeconds: 30, protocolVersion: 2026-07-28}", 1)
}

// TestTask2026Call_CompletesAfterPolls: at 2026-07-28 the tasks extension
// is declared, the server answers the tools/call with a task, and the call
// goes through the states and records of a 2025-11-25 task; the outcome is
// read from the last tasks/get (no tasks/result), the tool ran once.
func TestTask2026Call_CompletesAfterPolls(t *testing.T) {
	srv := modernTaskServer(t, mcptest.TaskOptions{WorkingPolls: 3, PollInterval: 10}, nil)
	db := openDB(t)
	res := runTask(t, db, modernTaskWorkflow(srv.URL, "at_most_once", ""), nil)
	if res.Err != nil || res.State != workflow.StateSucceeded {
		t.Fatalf("run: %s %v", res.State, res.Err)
	}
	if got := fmt.Sprint(res.Outputs["result"]); got != "map[n:42]" {
		t.Fatalf("output = %v", res.Outputs)
	}
	st, ts := srv.Stats(), srv.TaskStats()
	if st.Executed["research"] != 1 || ts.Created != 1 || ts.Gets != 4 || ts.Results != 0 || ts.Cancels != 0 {
		t.Fatalf("server executed %d, tasks %+v", st.Executed["research"], ts)
	}
	lines := describeRun(t, db, res.RunID)
	want := []string{
		"call.prepared",
		"mcp.request out tools/call prepared->dispatched",
		"call.task_accepted dispatched->accepted",
		"mcp.response in accepted->polling",
		"call.task_status",
		"call.result polling->succeeded",
	}
	if got := only(lines, "call.", "mcp.request out tools/call", "mcp.response in accepted"); !slices.Equal(got, want) {
		t.Fatalf("call events:\n%s", strings.Join(lines, "\n"))
	}
	doc, err := projector.Inspect(context.Background(), db, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	task := doc.ProtocolCalls[0].Task
	if task == nil || task.TaskID != "mcptest-task-1" || task.Polls != 4 || len(task.History) != 2 || task.History[1].Status != "completed" {
		b, _ := json.Marshal(task)
		t.Fatalf("inspect task = %s", b)
	}
}

// TestTask2026Call_NeverDeclares: useTasks: never keeps the extension
// undeclared: an optional tool is answered directly, no task is created.
func TestTask2026Call_NeverDeclares(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{ProtocolVersion: mcptest.Protocol20260728, Tasks: &mcptest.TaskOptions{PollInterval: 10}},
		func() mcptest.ToolDef {
			d := researchTool(nil)
			d.Execution = json.RawMessage(`{"taskSupport":"optional"}`)
			return d
		}())
	db := openDB(t)
	src := strings.Replace(modernTaskWorkflow(srv.URL, "at_most_once", ""), "protocolVersion: 2026-07-28}", "protocolVersion: 2026-07-28, useTasks: never}", 1)
	res := runTask(t, db, src, nil)
	if res.Err != nil || srv.TaskStats().Created != 0 || srv.Stats().Executed["research"] != 1 {
		t.Fatalf("run %v, tasks %+v", res.Err, srv.TaskStats())
	}
}

// TestTask2026Call_Failed: a failed task's inline error is the tools/call's
// definitive remote error.
func TestTask2026Call_Failed(t *testing.T) {
	srv := modernTaskServer(t, mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 10}, func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return nil, &mcptest.RPCError{Code: -32603, Message: "no sources"}
	})
	db := openDB(t)
	res := runTask(t, db, modernTaskWorkflow(srv.URL, "idempotent", ""), nil)
	if res.ExitCode != workflow.ExitFailed || res.Err == nil || !strings.Contains(res.Err.Error(), "no sources") {
		t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
	}
	doc, err := projector.Inspect(context.Background(), db, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	if got := doc.ProtocolCalls[0].Status; got != "failed" {
		t.Fatalf("call status %s", got)
	}
	if ts := srv.TaskStats(); ts.Created != 1 || ts.Results != 0 || srv.Stats().Executed["research"] != 1 {
		t.Fatalf("server: %+v", ts)
	}
}

// TestTask2026Call_Cancel: the user's cancel while the task works sends
// tasks/cancel (only acknowledged at 2026-07-28), then tasks/get finds the
// task cancelled: the call ends cancelled, confirmed.
func TestTask2026Call_Cancel(t *testing.T) {
	srv := modernTaskServer(t, mcptest.TaskOptions{WorkingPolls: 1000, PollInterval: 10}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db := openDB(t)
	obs := func(e events.Event) {
		if strings.HasSuffix(projector.Describe(e), "->polling") {
			cancel()
		}
	}
	res, err := (&workflow.Runner{DB: db, Observe: obs}).Run(ctx, mustParse(t, modernTaskWorkflow(srv.URL, "at_most_once", "")), nil, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != workflow.ExitCancelled || !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
	}
	if ts := srv.TaskStats(); ts.Cancels != 1 {
		t.Fatalf("server: %+v", ts)
	}
	doc, err := projector.Inspect(context.Background(), db, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	call := doc.ProtocolCalls[0]
	b, _ := json.Marshal(call.Task)
	if call.Status != "cancelled" || call.Task == nil || call.Task.Cancel == nil || !strings.Contains(string(b), `"confirmed":true`) {
		t.Fatalf("call %s, task %s", call.Status, b)
	}
	// The replay answers tasks/cancel and the tasks/get after it from the log.
	rep := replayOf(t, db, res.RunID)
	if rep.ExitCode != res.ExitCode {
		t.Fatalf("replay exit %d: %v; source %d", rep.ExitCode, rep.Err, res.ExitCode)
	}
	if s, r := only(describeRun(t, db, res.RunID), "call."), only(describeRun(t, db, rep.RunID), "call."); !slices.Equal(s, r) {
		t.Fatalf("call events differ:\nsource\n%s\nreplay\n%s", strings.Join(s, "\n"), strings.Join(r, "\n"))
	}
}

// TestTask2026Call_Replay: a run whose calls were 2026-07-28 tasks replays
// from the log with the server gone: the task, its polls (the same
// call.task_status events) and its outcome (a completed task's result, a
// failed task's error) answered from the recorded tasks/get; the same exit
// code and output.
func TestTask2026Call_Replay(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    mcptest.Handler
		exit int
		last string
	}{
		{"completed", nil, workflow.ExitOK, "call.result polling->succeeded"},
		{"failed", func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, &mcptest.RPCError{Code: -32603, Message: "no sources"}
		}, workflow.ExitFailed, "call.error polling->failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.NewServer(mcptest.Options{ProtocolVersion: mcptest.Protocol20260728, Tasks: &mcptest.TaskOptions{WorkingPolls: 2, PollInterval: 10}}, researchTool(tc.h))
			db := openDB(t)
			src := runTask(t, db, modernTaskWorkflow(srv.URL, "idempotent", ""), nil)
			if src.ExitCode != tc.exit {
				t.Fatalf("source exit %d: %v", src.ExitCode, src.Err)
			}
			srv.Close()
			blockNetwork(t, srv.URL)
			rep := replayOf(t, db, src.RunID)
			if rep.ExitCode != src.ExitCode || fmt.Sprint(rep.Outputs) != fmt.Sprint(src.Outputs) || fmt.Sprint(rep.Err) != fmt.Sprint(src.Err) {
				t.Fatalf("replay exit %d: %v, outputs %v; source %d: %v", rep.ExitCode, rep.Err, rep.Outputs, src.ExitCode, src.Err)
			}
			want := []string{"call.prepared", "replay.frames call prepared->dispatched", "call.task_accepted dispatched->accepted",
				"replay.frames call accepted->polling", "call.task_status", tc.last}
			if got := only(describeRun(t, db, rep.RunID), "call.", "replay.frames call "); !slices.Equal(got, want) {
				t.Fatalf("replay call events:\n%s", strings.Join(got, "\n"))
			}
			s, r := only(describeRun(t, db, src.RunID), "call."), only(describeRun(t, db, rep.RunID), "call.")
			if !slices.Equal(s, r) {
				t.Fatalf("call events differ:\nsource\n%s\nreplay\n%s", strings.Join(s, "\n"), strings.Join(r, "\n"))
			}
		})
	}
}

// TestTask2026Call_InputAnsweredByUpdate: a 2026-07-28 task asks for input
// twice; the action's elicitation setting answers each input request once
// with tasks/update (recorded: input_required → polling, the update's
// frames), and the task completes: one execution, no tasks/result. The
// replay answers tasks/update with an acknowledgement from the log: the
// same call events. Asking more than fsm.MaxInputRounds times ends the
// call as a 2025-11-25 task asking for input: tasks/cancel, uncertain.
func TestTask2026Call_InputAnsweredByUpdate(t *testing.T) {
	elicit := json.RawMessage(`{"message":"plan?","requestedSchema":{"type":"object","properties":{"plan":{"type":"string","default":"pro"}}}}`)
	for _, tc := range []struct {
		name            string
		rounds, updates int
		exit            int
	}{{"two rounds", 2, 2, workflow.ExitOK}, {"too many rounds", 20, 8, workflow.ExitUncertain}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := modernTaskServer(t, mcptest.TaskOptions{WorkingPolls: 1, InputRounds: tc.rounds, Elicit: elicit, PollInterval: 10}, nil)
			db := openDB(t)
			res := runTask(t, db, modernTaskWorkflow(srv.URL, "at_most_once", "elicitation: {mode: defaults}"), nil)
			if res.ExitCode != tc.exit {
				t.Fatalf("exit %d: %v", res.ExitCode, res.Err)
			}
			ts := srv.TaskStats()
			if ts.Updates != tc.updates || ts.Results != 0 || srv.Stats().Executed["research"] != 1 {
				t.Fatalf("server: %+v", ts)
			}
			if string(ts.InputResponses[0]) != `{"ask-1":{"action":"accept","content":{"plan":"pro"}}}` {
				t.Fatalf("update sent %s", ts.InputResponses[0])
			}
			lines := describeRun(t, db, res.RunID)
			if n := strings.Count(strings.Join(lines, "\n"), "input_required->polling"); n != tc.updates {
				t.Fatalf("%d updates recorded, want %d:\n%s", n, tc.updates, strings.Join(lines, "\n"))
			}
			if tc.exit == workflow.ExitUncertain && ts.Cancels != 1 {
				t.Fatalf("tasks/cancel sent %d times", ts.Cancels)
			}
			rep := replayOf(t, db, res.RunID)
			if rep.ExitCode != res.ExitCode || fmt.Sprint(rep.Outputs) != fmt.Sprint(res.Outputs) {
				t.Fatalf("replay exit %d: %v; source %d", rep.ExitCode, rep.Err, res.ExitCode)
			}
			if s, r := movesOf(t, db, res.RunID), movesOf(t, db, rep.RunID); !slices.Equal(s, r) {
				t.Fatalf("call moves differ:\nsource %v\nreplay %v", s, r)
			}
			if s, r := only(lines, "call.task_status"), only(describeRun(t, db, rep.RunID), "call.task_status"); len(s) != len(r) {
				t.Fatalf("task statuses: source %d, replay %d", len(s), len(r))
			}
		})
	}
}

// movesOf is a run's call transitions as from->to (trigger).
func movesOf(t *testing.T, db *events.DB, runID string) []string {
	var out []string
	for _, m := range runMoves(t, db, runID) {
		out = append(out, m.From+"->"+m.To+" ("+m.Trigger+")")
	}
	return out
}
