package transport

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestMCPTestTask_MalformedPollInterval: a task answer whose pollInterval
// is not a usable number is still a valid task (CreateTaskResult and
// tasks/get): the suggestion is ignored, PollTask waits its default.
func TestMCPTestTask_MalformedPollInterval(t *testing.T) {
	for _, raw := range []string{`"soon"`, `{"ms":5}`, `-3`, `true`, `1e400`} {
		t.Run(raw, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, RawPollInterval: json.RawMessage(raw)}}, taskTool(nil))
			s, _, task := startTask(t, srv)
			if task.PollInterval != 0 || task.Status != TaskWorking {
				t.Fatalf("task = %+v; want working with no poll interval", task)
			}
			got, err := s.GetTask(context.Background(), task.ID, nil)
			if err != nil || got.PollInterval != 0 {
				t.Fatalf("GetTask = %+v, %v", got, err)
			}
		})
	}
}

// TestMCPTestTask_ResultOfAnotherTask: tasks/result whose _meta
// related-task names another task, or is not an object with a string
// taskId, is malformed (the task may have run: ask again, never take it as
// the task's output); naming the task asked about, or absent, is fine.
func TestMCPTestTask_ResultOfAnotherTask(t *testing.T) {
	for _, tc := range []struct {
		meta string
		ok   bool
	}{
		{`{"io.modelcontextprotocol/related-task":{"taskId":"mcptest-task-99"}}`, false},
		{`{"io.modelcontextprotocol/related-task":"mcptest-task-1"}`, false},
		{`{"io.modelcontextprotocol/related-task":{"taskId":7}}`, false},
		{`{"io.modelcontextprotocol/related-task":{}}`, false},
		{`{"io.modelcontextprotocol/related-task":{"taskId":"mcptest-task-1"}}`, true},
		{`{"other":1}`, true}, // mcptest adds the right one
	} {
		t.Run(tc.meta, func(t *testing.T) {
			h := func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				return &mcptest.Result{Raw: json.RawMessage(`{"content":[],"structuredContent":{"n":1},"_meta":` + tc.meta + `}`)}, nil
			}
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{}}, taskTool(h))
			s, _, task := startTask(t, srv)
			res, err := s.TaskResult(context.Background(), task.ID, nil)
			if tc.ok {
				if err != nil || res == nil {
					t.Fatalf("TaskResult = %v, %v", res, err)
				}
				return
			}
			e := wantKind(t, err, KindMalformed)
			if res != nil || !e.Sent || !PollAgain(err) || TaskLost(err) || !strings.Contains(err.Error(), "related-task") {
				t.Fatalf("TaskResult = %v, %v; want malformed, sent, asked again", res, err)
			}
		})
	}
}

// TestMCPTestTask_IDHoldingSecret: a task id that holds a secret value is
// kept and shown redacted (RedactedID); ID stays the server's, to ask.
func TestMCPTestTask_IDHoldingSecret(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1}}, taskTool(nil))
	c := secretClient(t, srv, "mcptest-task-1")
	s := connect(t, c, nil)
	call, err := s.CallToolTask(context.Background(), CallRequest{Tool: "slow"}, time.Minute, nil)
	if err != nil || call.Task == nil {
		t.Fatalf("CallToolTask = %+v, %v", call, err)
	}
	task := call.Task
	if task.ID != "mcptest-task-1" || strings.Contains(task.RedactedID, "mcptest-task-1") || task.RedactedID == "" {
		t.Fatalf("task id %q shown as %q", task.ID, task.RedactedID)
	}
	if got, err := s.GetTask(context.Background(), task.ID, nil); err != nil || got.ID != task.ID {
		t.Fatalf("GetTask by the real id = %+v, %v", got, err)
	}
}
