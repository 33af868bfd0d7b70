package transport

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/tspeer"
)

// TestTask_TSReference runs simulate-research-query of the reference
// TypeScript server (task support required, ≈ 4 s in four stages) through
// transport alone: create, poll honouring its pollInterval until completed
// with a status message per stage, fetch the result; then ask again from a
// reattached session, as a restarted agentctl would.
func TestTask_TSReference(t *testing.T) {
	url := tspeer.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var rec recorder
	s := connect(t, newClient(t, url, nil), rec.sink)
	if !s.ToolCallTasks() {
		t.Fatalf("reference server does not advertise tasks for tools/call: %s", s.Capabilities)
	}
	cat, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tool, ok := cat.Find("simulate-research-query")
	if !ok || tool.TaskSupport() != TaskSupportRequired {
		t.Fatalf("simulate-research-query: found %v, taskSupport %q; want required", ok, tool.TaskSupport())
	}
	req := CallRequest{Tool: tool.Name, Arguments: []byte(`{"topic":"durable clients"}`)}
	if err := ValidateArguments(tool, req.Arguments); err != nil {
		t.Fatal(err)
	}
	call, err := s.CallToolTask(ctx, req, time.Hour, rec.sink)
	if err != nil {
		t.Fatal(err)
	}
	if call.Task == nil || call.Task.Status != TaskWorking || call.Task.PollInterval != time.Second {
		t.Fatalf("CreateTaskResult = %+v; want a working task with pollInterval 1s", call.Task)
	}
	var messages []string
	last, err := s.PollTask(ctx, call.Task, rec.sink, func(tk *Task) error {
		if n := len(messages); n == 0 || messages[n-1] != tk.StatusMessage {
			messages = append(messages, tk.StatusMessage)
		}
		return nil
	})
	if err != nil || last.Status != TaskCompleted {
		t.Fatalf("PollTask = %+v, %v; want completed", last, err)
	}
	// Polled once a second, the four one-second stages show at least two
	// distinct messages, each a stage name.
	if len(messages) < 2 {
		t.Errorf("status messages %q; want one per stage seen", messages)
	}
	for _, m := range messages {
		if !strings.HasSuffix(m, "...") {
			t.Errorf("status message %q is not a stage", m)
		}
	}

	// A restarted agentctl: a new client on the recorded session, no initialize.
	again, err := newClient(t, url, nil).Reattach(s.SessionID())
	if err != nil {
		t.Fatal(err)
	}
	got, err := again.GetTask(ctx, last.ID, nil)
	if err != nil || got.Status != TaskCompleted {
		t.Fatalf("GetTask on the reattached session = %+v, %v", got, err)
	}
	res, err := again.TaskResult(ctx, last.ID, nil)
	if err != nil || res.IsError || !strings.Contains(string(res.Content), "Research Report: durable clients") {
		t.Fatalf("TaskResult = %+v, %v", res, err)
	}
	if err := ValidateOutput(tool, res.StructuredContent); err != nil {
		t.Error(err)
	}

	// An unknown task id is lost; a session the server never issued is a
	// 400 from this server (not 404): not proof of a lost task.
	_, err = again.GetTask(ctx, "no-such-task", nil)
	if e := wantKind(t, err, KindRemoteError); e.Code != CodeInvalidParams || !TaskLost(err) {
		t.Errorf("unknown task: %v; want -32602, TaskLost", err)
	}
	stranger, err := newClient(t, url, nil).Reattach("00000000-0000-0000-0000-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	_, err = stranger.GetTask(ctx, last.ID, nil)
	if e := wantKind(t, err, KindHTTPStatus); e.Status != 400 || TaskLost(err) {
		t.Errorf("unknown session: %v; want http 400, not TaskLost", err)
	}

	// Every tasks/get went through the sink, out before in.
	outs, ins := 0, 0
	for _, f := range rec.all() {
		if f.Method == methodTasksGet && f.Dir == "out" {
			outs++
		}
		if f.Dir == "in" && f.Kind == "response" && strings.Contains(string(f.Body), `"taskId"`) {
			ins++
		}
	}
	if outs < 3 || ins < outs {
		t.Errorf("sink saw %d tasks/get out frames and %d task answers", outs, ins)
	}
}
