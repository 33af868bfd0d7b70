package transport

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// taskTool is a tool that must be called as a task; handler nil answers a
// structured {"n": 1}.
func taskTool(handler mcptest.Handler) mcptest.ToolDef {
	if handler == nil {
		handler = func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"n": 1}}, nil
		}
	}
	return mcptest.ToolDef{Name: "slow", InputSchema: json.RawMessage(`{"type":"object"}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`),
		Execution:    json.RawMessage(`{"taskSupport":"required"}`), Handler: handler}
}

// startTask connects to a task server and creates one task of "slow".
func startTask(t *testing.T, srv *mcptest.Server) (*Session, Tool, *Task) {
	t.Helper()
	s := connect(t, newClient(t, srv.URL, nil), nil)
	if !s.ToolCallTasks() {
		t.Fatalf("mcptest with Tasks does not advertise tasks: %s", s.Capabilities)
	}
	cat, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	tool, _ := cat.Find("slow")
	call, err := s.CallToolTask(context.Background(), CallRequest{Tool: "slow"}, time.Minute, nil)
	if err != nil || call.Task == nil {
		t.Fatalf("CallToolTask = %+v, %v", call, err)
	}
	return s, tool, call.Task
}

// TestMCPTestTask_CompletesAfterPolls: N working polls, spaced by the
// server's pollInterval as the server measured them, then the result, valid
// against the output schema; the tool ran once.
func TestMCPTestTask_CompletesAfterPolls(t *testing.T) {
	const interval, working = 30, 3
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{PollInterval: interval, WorkingPolls: working}}, taskTool(nil))
	s, tool, task := startTask(t, srv)
	if task.TTL != time.Minute || task.PollInterval != interval*time.Millisecond {
		t.Errorf("task %+v; want ttl 1m, pollInterval %dms", task, interval)
	}
	last, err := s.PollTask(context.Background(), task, nil, nil)
	if err != nil || last.Status != TaskCompleted {
		t.Fatalf("PollTask = %+v, %v", last, err)
	}
	res, err := s.TaskResult(context.Background(), last.ID, nil)
	if err != nil || res.IsError {
		t.Fatalf("TaskResult = %+v, %v", res, err)
	}
	if err := ValidateOutput(tool, res.StructuredContent); err != nil {
		t.Error(err)
	}
	st, ts := srv.Stats(), srv.TaskStats()
	if st.Calls["slow"] != 1 || st.Executed["slow"] != 1 || ts.Created != 1 || ts.Gets != working+1 || ts.Results != 1 {
		t.Errorf("server saw calls %v executed %v, tasks %+v; want 1, 1, %d gets, 1 result", st.Calls, st.Executed, ts, working+1)
	}
	prev := ts.CreatedAt[task.ID]
	for i, at := range ts.PollTimes[task.ID] {
		if at.Sub(prev) < interval*time.Millisecond {
			t.Errorf("poll %d came %v after the previous request; pollInterval %dms", i+1, at.Sub(prev), interval)
		}
		prev = at
	}
}

// TestMCPTestTask_Outcomes: failed, cancelled by the server, input_required
// (then tasks/cancel confirmed), and a result violating the output schema.
func TestMCPTestTask_Outcomes(t *testing.T) {
	ctx := context.Background()
	t.Run("failed", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{PollInterval: 10, WorkingPolls: 1}},
			taskTool(func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				return nil, errors.New("quota exceeded")
			}))
		s, _, task := startTask(t, srv)
		last, err := s.PollTask(ctx, task, nil, nil)
		if err != nil || last.Status != TaskFailed {
			t.Fatalf("PollTask = %+v, %v; want failed", last, err)
		}
		if res, err := s.TaskResult(ctx, last.ID, nil); err != nil || !res.IsError {
			t.Errorf("TaskResult = %+v, %v; want isError", res, err)
		}
	})
	t.Run("remote error", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{PollInterval: 10}},
			taskTool(func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				return nil, &mcptest.RPCError{Code: -32000, Message: "backend down"}
			}))
		s, _, task := startTask(t, srv)
		_, err := s.TaskResult(ctx, task.ID, nil)
		if e := wantKind(t, err, KindRemoteError); e.Code != -32000 || TaskLost(err) {
			t.Errorf("TaskResult of a failed call: %v; want its JSON-RPC error, not lost", err)
		}
	})
	for _, status := range []string{mcptest.TaskCancelled, mcptest.TaskInputRequired} {
		t.Run(status, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{PollInterval: 10, WorkingPolls: 1}},
				taskTool(func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
					mcptest.SetTaskStatus(ctx, status, "need a city")
					return &mcptest.Result{}, nil
				}))
			s, _, task := startTask(t, srv)
			last, err := s.PollTask(ctx, task, nil, nil)
			if err != nil || string(last.Status) != status || last.StatusMessage != "need a city" {
				t.Fatalf("PollTask = %+v, %v; want %s", last, err, status)
			}
			got, err := s.CancelTask(ctx, last.ID, nil)
			if status == mcptest.TaskInputRequired {
				if err != nil || got.Status != TaskCancelled {
					t.Errorf("CancelTask of input_required = %+v, %v; want cancelled", got, err)
				}
			} else if e := wantKind(t, err, KindRemoteError); e.Code != CodeInvalidParams {
				t.Errorf("CancelTask of a cancelled task: %v; want -32602", err)
			}
		})
	}
	t.Run("output schema violated", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{}},
			taskTool(func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				return &mcptest.Result{StructuredContent: map[string]any{"n": "one"}}, nil
			}))
		s, tool, task := startTask(t, srv)
		res, err := s.TaskResult(ctx, task.ID, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantKind(t, ValidateOutput(tool, res.StructuredContent), KindInvalidOutput)
	})
}

// TestMCPTestTask_CancelWhileWorking: tasks/cancel confirms, and the task
// stays cancelled.
func TestMCPTestTask_CancelWhileWorking(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 100}}, taskTool(nil))
	s, _, task := startTask(t, srv)
	got, err := s.CancelTask(context.Background(), task.ID, nil)
	if err != nil || got.Status != TaskCancelled {
		t.Fatalf("CancelTask = %+v, %v", got, err)
	}
	if again, err := s.GetTask(context.Background(), task.ID, nil); err != nil || again.Status != TaskCancelled {
		t.Errorf("GetTask after cancel = %+v, %v", again, err)
	}
}

// TestMCPTestTask_Lost: an expired task, an unknown id, a task of another
// session and an expired session are lost; a 503 on a poll is not, and the
// next poll goes on.
func TestMCPTestTask_Lost(t *testing.T) {
	ctx := context.Background()
	opts := mcptest.Options{Tasks: &mcptest.TaskOptions{PollInterval: 10, WorkingPolls: 5}}
	t.Run("expired", func(t *testing.T) {
		srv := mcptest.Start(t, opts, taskTool(nil))
		s, _, task := startTask(t, srv)
		srv.ExpireTasks()
		_, err := s.PollTask(ctx, task, nil, nil)
		if e := wantKind(t, err, KindRemoteError); !TaskLost(err) || e.Message == "" {
			t.Errorf("poll of an expired task: %v; want TaskLost", err)
		}
	})
	t.Run("unknown id", func(t *testing.T) {
		srv := mcptest.Start(t, opts, taskTool(nil))
		s, _, _ := startTask(t, srv)
		if _, err := s.GetTask(ctx, "mcptest-task-99", nil); !TaskLost(err) {
			t.Errorf("unknown id: %v; want TaskLost", err)
		}
	})
	t.Run("other session", func(t *testing.T) {
		srv := mcptest.Start(t, opts, taskTool(nil))
		_, _, task := startTask(t, srv)
		other := connect(t, newClient(t, srv.URL, nil), nil)
		if _, err := other.GetTask(ctx, task.ID, nil); !TaskLost(err) {
			t.Errorf("another session's task: %v; want TaskLost", err)
		}
	})
	t.Run("session expired", func(t *testing.T) {
		srv := mcptest.Start(t, opts, taskTool(nil))
		s, _, task := startTask(t, srv)
		srv.ExpireSessions()
		again, err := newClient(t, srv.URL, nil).Reattach(s.SessionID())
		if err != nil {
			t.Fatal(err)
		}
		_, err = again.GetTask(ctx, task.ID, nil)
		wantKind(t, err, KindSessionExpired)
		if !TaskLost(err) {
			t.Errorf("404 on the task's session: %v; want TaskLost", err)
		}
	})
	t.Run("503 then poll again", func(t *testing.T) {
		srv := mcptest.Start(t, opts, taskTool(nil))
		srv.Inject(mcptest.Fault{RPCMethod: "tasks/get", Nth: 2, Status: http.StatusServiceUnavailable})
		s, _, task := startTask(t, srv)
		polls := 0
		_, err := s.PollTask(ctx, task, nil, func(*Task) error { polls++; return nil })
		if !PollAgain(err) || TaskLost(err) || polls != 1 {
			t.Fatalf("503 on the second poll: %v after %d polls; want PollAgain after 1", err, polls)
		}
		last, err := s.PollTask(ctx, task, nil, nil)
		if err != nil || last.Status != TaskCompleted {
			t.Errorf("polling again: %+v, %v", last, err)
		}
		if st := srv.Stats(); st.Executed["slow"] != 1 || st.Calls["slow"] != 1 {
			t.Errorf("tool ran %v times; want once", st.Executed)
		}
	})
}

// TestMCPTestTask_Negotiation: without Options.Tasks nothing is advertised
// and params.task is ignored; with it, a required tool called without a
// task is refused (-32601), as the specification says.
func TestMCPTestTask_Negotiation(t *testing.T) {
	ctx := context.Background()
	plain := mcptest.Start(t, mcptest.Options{}, taskTool(nil))
	s := connect(t, newClient(t, plain.URL, nil), nil)
	if s.ToolCallTasks() {
		t.Error("ToolCallTasks without Options.Tasks")
	}
	tc, err := s.CallToolTask(ctx, CallRequest{Tool: "slow"}, 0, nil)
	if err != nil || tc.Result == nil || tc.Task != nil {
		t.Errorf("params.task on a server without tasks: %+v, %v; want a direct result", tc, err)
	}
	tasks := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{}}, taskTool(nil))
	s = connect(t, newClient(t, tasks.URL, nil), nil)
	_, err = s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
	if e := wantKind(t, err, KindRemoteError); e.Code != -32601 {
		t.Errorf("required tool called directly: %v; want -32601", err)
	}
	if st := tasks.Stats(); st.Executed["slow"] != 0 {
		t.Errorf("refused call executed %d times", st.Executed["slow"])
	}
}

// TestTask_GoSDKServer: the go-sdk server (v1.8.0) implements no MCP tasks:
// it advertises none, lists no execution.taskSupport, and answers tasks/get
// with HTTP 400 ("JSON RPC not handled") — neither a lost task nor worth
// polling again.
func TestTask_GoSDKServer(t *testing.T) {
	ts := newSDKServer(t, nil)
	s := connect(t, newClient(t, ts.URL, nil), nil)
	if s.ToolCallTasks() {
		t.Errorf("go-sdk advertises tasks: %s", s.Capabilities)
	}
	cat, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range cat.Tools {
		if tool.TaskSupport() != TaskSupportForbidden {
			t.Errorf("tool %s: taskSupport %s", tool.Name, tool.TaskSupport())
		}
	}
	_, err = s.GetTask(context.Background(), "t1", nil)
	if e := wantKind(t, err, KindHTTPStatus); e.Status != http.StatusBadRequest || TaskLost(err) || PollAgain(err) {
		t.Errorf("tasks/get on go-sdk: %v; want http 400, neither lost nor poll again", err)
	}
}
