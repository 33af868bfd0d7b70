package transport

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// modernTaskServer is a 2026-07-28 mcptest server whose "slow" tool (task
// support required unless optional) becomes a task for a client declaring
// the tasks extension.
func modernTaskServer(t *testing.T, opts mcptest.TaskOptions, optional bool, handler mcptest.Handler) *mcptest.Server {
	t.Helper()
	tool := taskTool(handler)
	if optional {
		tool.Execution = json.RawMessage(`{"taskSupport":"optional"}`)
	}
	return mcptest.Start(t, mcptest.Options{ProtocolVersion: mcptest.Protocol20260728, Tasks: &opts}, tool)
}

// modernTaskClient connects pinned to 2026-07-28, declaring the tasks
// extension when ext.
func modernTaskClient(t *testing.T, srv *mcptest.Server, ext bool) *Session {
	t.Helper()
	c := newClient(t, srv.URL, func(cfg *Config) {
		cfg.ProtocolVersion, cfg.TasksExtension, cfg.Elicitation = Protocol20260728, ext, true
	})
	s := connect(t, c, nil)
	if _, err := s.ListTools(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTasks2026_PolledToCompletion: the server answers the tools/call with
// a task; tasks/get (Mcp-Name = the task id) says working twice, then
// completed with the result inline, read as a direct call's; the tool ran
// once and nothing else was sent.
func TestTasks2026_PolledToCompletion(t *testing.T) {
	srv := modernTaskServer(t, mcptest.TaskOptions{WorkingPolls: 2, PollInterval: 10, TTL: 60000}, false, nil)
	s := modernTaskClient(t, srv, true)
	ctx := context.Background()
	var rec recorder
	res, err := s.CallTool(ctx, CallRequest{Tool: "slow"}, rec.sink)
	if err != nil || res.Task == nil {
		t.Fatalf("CallTool = %+v, %v; want a task", res, err)
	}
	if res.Task.Status != TaskWorking || res.Task.PollInterval.Milliseconds() != 10 || res.Task.TTL.Milliseconds() != 60000 {
		t.Errorf("created task %+v", res.Task)
	}
	last, err := s.AwaitTask(ctx, res.Task, nil, rec.sink, nil)
	if err != nil || last.Status != TaskCompleted {
		t.Fatalf("AwaitTask = %+v, %v", last, err)
	}
	out, err := s.TaskOutcome(last)
	if err != nil || string(out.StructuredContent) != `{"n":1}` {
		t.Fatalf("TaskOutcome = %+v, %v", out, err)
	}
	st, ts := srv.Stats(), srv.TaskStats()
	if st.Executed["slow"] != 1 || ts.Created != 1 || ts.Gets != 3 || ts.Updates != 0 {
		t.Errorf("executed %d, tasks %+v; want 1 execution, 1 task, 3 polls", st.Executed["slow"], ts)
	}
	for _, r := range st.Requests {
		if r.RPCMethod == "tasks/get" && r.Header.Get("Mcp-Name") != res.Task.ID {
			t.Errorf("tasks/get Mcp-Name %q, want the task id %q", r.Header.Get("Mcp-Name"), res.Task.ID)
		}
	}
	if got := strings.Join(outMethods(&rec), ","); got != "tools/call,tasks/get,tasks/get,tasks/get" {
		t.Errorf("sent %s", got)
	}
}

// TestTasks2026_InputRequiredAnsweredByUpdate: an input_required task's
// elicitation is answered by the policy with tasks/update, each key once;
// the task then completes.
func TestTasks2026_InputRequiredAnsweredByUpdate(t *testing.T) {
	elicit := json.RawMessage(`{"message":"plan?","requestedSchema":{"type":"object","properties":{"plan":{"type":"string","default":"pro"}}}}`)
	srv := modernTaskServer(t, mcptest.TaskOptions{InputRounds: 2, Elicit: elicit, PollInterval: 10}, false, nil)
	s := modernTaskClient(t, srv, true)
	ctx := context.Background()
	res, err := s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
	if err != nil || res.Task == nil {
		t.Fatalf("CallTool = %+v, %v", res, err)
	}
	var seen []TaskStatus
	last, err := s.AwaitTask(ctx, res.Task, &ElicitationPolicy{Mode: ElicitDefaults}, nil, func(t *Task) error { seen = append(seen, t.Status); return nil })
	if err != nil || last.Status != TaskCompleted {
		t.Fatalf("AwaitTask = %+v, %v (saw %v)", last, err, seen)
	}
	ts := srv.TaskStats()
	if ts.Updates != 2 || len(ts.InputResponses) != 2 {
		t.Fatalf("updates %d %s, want 2", ts.Updates, ts.InputResponses)
	}
	for i, want := range []string{`{"ask-1":{"action":"accept","content":{"plan":"pro"}}}`, `{"ask-2":{"action":"accept","content":{"plan":"pro"}}}`} {
		if got := string(ts.InputResponses[i]); got != want {
			t.Errorf("update %d sent %s, want %s", i+1, got, want)
		}
	}
	if srv.Stats().Executed["slow"] != 1 {
		t.Errorf("executed %d", srv.Stats().Executed["slow"])
	}
}

// TestTasks2026_Outcomes: a JSON-RPC error of the tool is a failed task,
// read as the tools/call's definitive remote error; an isError result is a
// completed one; a cancelled task is only acknowledged, then polled as
// cancelled; an expired task is lost.
func TestTasks2026_Outcomes(t *testing.T) {
	ctx := context.Background()
	t.Run("failed", func(t *testing.T) {
		srv := modernTaskServer(t, mcptest.TaskOptions{PollInterval: 10}, false, func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, &mcptest.RPCError{Code: -32603, Message: "backend down"}
		})
		s := modernTaskClient(t, srv, true)
		res, err := s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
		if err != nil || res.Task == nil {
			t.Fatalf("CallTool = %+v, %v", res, err)
		}
		last, err := s.AwaitTask(ctx, res.Task, nil, nil, nil)
		if err != nil || last.Status != TaskFailed {
			t.Fatalf("AwaitTask = %+v, %v", last, err)
		}
		_, err = s.TaskOutcome(last)
		if e := wantKind(t, err, KindRemoteError); e.Code != -32603 || e.Op != "tools/call" || !strings.Contains(e.Message, "backend down") || e.MayHaveExecuted() {
			t.Errorf("outcome %+v", e)
		}
	})
	t.Run("isError", func(t *testing.T) {
		srv := modernTaskServer(t, mcptest.TaskOptions{PollInterval: 10}, false, func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, errors.New("no such order")
		})
		s := modernTaskClient(t, srv, true)
		res, _ := s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
		last, err := s.AwaitTask(ctx, res.Task, nil, nil, nil)
		if err != nil || last.Status != TaskCompleted {
			t.Fatalf("AwaitTask = %+v, %v", last, err)
		}
		if out, err := s.TaskOutcome(last); err != nil || !out.IsError {
			t.Errorf("TaskOutcome = %+v, %v; want the isError result", out, err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		srv := modernTaskServer(t, mcptest.TaskOptions{WorkingPolls: 5, PollInterval: 10}, false, nil)
		s := modernTaskClient(t, srv, true)
		res, _ := s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
		if task, err := s.CancelTask(ctx, res.Task.ID, nil); err != nil || task != nil {
			t.Fatalf("CancelTask = %+v, %v; want an acknowledgement", task, err)
		}
		got, err := s.GetTask(ctx, res.Task.ID, nil)
		if err != nil || got.Status != TaskCancelled {
			t.Fatalf("GetTask = %+v, %v", got, err)
		}
		if _, err := s.TaskOutcome(got); KindOf(err) != KindMalformed {
			t.Errorf("outcome of a cancelled task: %v", err)
		}
	})
	t.Run("expired", func(t *testing.T) {
		srv := modernTaskServer(t, mcptest.TaskOptions{WorkingPolls: 5, PollInterval: 10}, false, nil)
		s := modernTaskClient(t, srv, true)
		res, _ := s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
		srv.ExpireTasks()
		if _, err := s.GetTask(ctx, res.Task.ID, nil); !TaskLost(err) {
			t.Errorf("GetTask of an expired task: %v; want TaskLost", err)
		}
	})
}

// TestTasks2026_NotDeclared: without the extension the server never makes
// a task: an optional tool answers directly, a required one is -32021; and
// a task answered anyway is malformed.
func TestTasks2026_NotDeclared(t *testing.T) {
	ctx := context.Background()
	srv := modernTaskServer(t, mcptest.TaskOptions{PollInterval: 10}, true, nil)
	s := modernTaskClient(t, srv, false)
	res, err := s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
	if err != nil || res.Task != nil || string(res.StructuredContent) != `{"n":1}` {
		t.Fatalf("optional tool without the extension: %+v, %v", res, err)
	}
	req := modernTaskServer(t, mcptest.TaskOptions{PollInterval: 10}, false, nil)
	s = modernTaskClient(t, req, false)
	_, err = s.CallTool(ctx, CallRequest{Tool: "slow"}, nil)
	if e := wantKind(t, err, KindRemoteError); e.Code != CodeMissingClientCapabilities {
		t.Errorf("required tool without the extension: %+v", e)
	}
	if req.Stats().Executed["slow"] != 0 || req.TaskStats().Created != 0 {
		t.Errorf("the tool ran: %+v", req.TaskStats())
	}
	rogue := mcptest.Start(t, mcptest.Options{ProtocolVersion: mcptest.Protocol20260728}, okTool("ok"))
	rogue.Inject(mcptest.Fault{RPCMethod: "tools/call", Body: []byte(`{"jsonrpc":"2.0","id":3,"result":{"resultType":"task","taskId":"t1","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":null}}`)})
	s = modernTaskClient(t, rogue, false)
	_, err = s.CallTool(ctx, CallRequest{Tool: "ok"}, nil)
	if e := wantKind(t, err, KindMalformed); !strings.Contains(e.Message, `resultType "task"`) {
		t.Errorf("a task for a client that did not declare the extension: %v", err)
	}
}
