package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
)

// Replay of MCP tasks at 2026-07-28 (the tasks extension): a tools/call
// the server answered with a task is answered with the recorded task, its
// polls as at 2025-11-25 (task.go), and its outcome from the
// tasks/get that carried it inline; there is no tasks/result to answer.

var _ workflow.Tasks2026Session = (*replaySession)(nil)

// createdTask answers a tools/call with the task the source's server
// created (its recorded call.task_accepted).
func (s *replaySession) createdTask(send *recSend) *transport.CallResult {
	a := send.task.accepted
	s.src.tasks[s.remote+"\x00"+a.TaskID] = send.task
	return &transport.CallResult{ID: a.JSONRPCID, Task: &transport.Task{ID: a.TaskID, RedactedID: a.TaskID, Status: transport.TaskStatus(a.Status),
		StatusMessage: a.StatusMessage, TTL: time.Duration(a.TTLMs) * time.Millisecond,
		PollInterval: time.Duration(a.PollIntervalMs) * time.Millisecond}}
}

// TaskOutcome answers a terminal task's outcome from the response of the
// tasks/get that last answered it: a completed task's result (with the
// source's verdict on it), a failed task's JSON-RPC error.
func (s *replaySession) TaskOutcome(t *transport.Task) (*transport.CallResult, error) {
	rt := s.src.tasks[s.remote+"\x00"+t.ID]
	if rt == nil || rt.next == 0 {
		return nil, s.div("task", "no answered tasks/get", "the task's outcome")
	}
	st := rt.steps[rt.next-1]
	for i := len(st.responses) - 1; i >= 0; i-- {
		f := st.responses[i]
		var m struct {
			Result *struct {
				Result json.RawMessage `json:"result"`
				Error  *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			} `json:"result"`
		}
		if json.Unmarshal(f.Body, &m) != nil || m.Result == nil {
			continue
		}
		switch {
		case t.Status == transport.TaskCompleted && len(m.Result.Result) > 0 && st.result != nil:
			// The result as the source read it: no JSON-RPC id of its own.
			body, err := json.Marshal(map[string]json.RawMessage{"result": m.Result.Result})
			if err != nil {
				return nil, err
			}
			return resultFrom([]vocab.Frame{{Dir: "in", Kind: "response", Body: body}}, st.result)
		case t.Status == transport.TaskFailed && m.Result.Error != nil:
			return nil, &transport.Error{Op: "tools/call", Kind: transport.KindRemoteError, Code: m.Result.Error.Code, Message: m.Result.Error.Message, Sent: true}
		}
	}
	return nil, s.div("task", fmt.Sprintf("task %s without a recorded outcome", rt.accepted.TaskIDDigest), "its outcome")
}

// UpdateTask acknowledges a tasks/update the source sent, from its
// recorded step.
func (s *replaySession) UpdateTask(ctx context.Context, taskID string, _ map[string]json.RawMessage, sink transport.Sink) error {
	st, err := s.answered(ctx, taskID, "tasks/update", sink)
	if err != nil {
		return err
	}
	if st.callErr != nil {
		return st.failure("tasks/update")
	}
	return nil
}

// inputOf reads the input requests of an input_required task from the
// response of the tasks/get that recorded it (nil when none).
func inputOf(responses []vocab.Frame) *transport.InputRequired {
	for i := len(responses) - 1; i >= 0; i-- {
		var m struct {
			Result *struct {
				InputRequests map[string]json.RawMessage `json:"inputRequests"`
			} `json:"result"`
		}
		if json.Unmarshal(responses[i].Body, &m) == nil && m.Result != nil && m.Result.InputRequests != nil {
			return &transport.InputRequired{Requests: m.Result.InputRequests}
		}
	}
	return nil
}
