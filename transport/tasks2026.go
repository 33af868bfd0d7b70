package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
)

// MCP tasks at 2026-07-28: the io.modelcontextprotocol/tasks extension
// (SEP-2663). The client declares it in every request's clientCapabilities
// (Config.TasksExtension); the server alone decides, per tools/call, to
// answer a CreateTaskResult (resultType "task", the task's fields at the
// top level) instead of the result: CallTool then returns a CallResult
// whose Task is set. The task is asked about with tasks/get (GetTask,
// PollTask), whose answer carries the outcome inline (a completed task's
// result, a failed task's JSON-RPC error: TaskOutcome) or, for
// input_required, the server's inputRequests, answered with tasks/update
// (UpdateTask; AwaitTask does both). tasks/cancel (CancelTask) is only
// acknowledged. There is no tasks/result. Every request names its task in
// Mcp-Name. The task id is persisted by the caller exactly as at
// 2025-11-25: polling resumes after a crash.

// ExtensionTasks is the tasks extension's identifier.
const ExtensionTasks = "io.modelcontextprotocol/tasks"

const (
	resultTypeTask    = "task"
	methodTasksUpdate = "tasks/update"
	// maxTaskUpdates bounds the tasks/update requests AwaitTask sends for
	// one task (as fsm.MaxInputRounds bounds input-required results): a
	// server that keeps asking fails.
	maxTaskUpdates = 8
)

// statelessCapabilities are the clientCapabilities of a 2026-07-28
// request: those declared at initialize, and the tasks extension when
// configured.
func (c *Client) statelessCapabilities() map[string]any {
	caps := c.capabilities()
	if c.cfg.TasksExtension {
		caps["extensions"] = map[string]any{ExtensionTasks: map[string]any{}}
	}
	return caps
}

// createdTask reads a CreateTaskResult answering op (only tools/call may
// be answered so, and only to a client that declared the extension).
func (s *Session) createdTask(op string, result, id json.RawMessage) (*CallResult, error) {
	if op != "tools/call" || !s.c.cfg.TasksExtension {
		return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("resultType %q answering %s, which may not create a task here", resultTypeTask, op)}
	}
	t, err := s.parseTask(op, result, "")
	if err != nil {
		return nil, err
	}
	if t.Result != nil || t.failure != nil || t.Input != nil {
		return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "CreateTaskResult carries result, error or inputRequests"}
	}
	return &CallResult{Raw: s.c.red.json(result), ID: id, Task: t, red: s.c.red}, nil
}

// detail reads the status-specific members of a 2026-07-28 task object
// into t: a completed task's result, a failed task's error, an
// input_required task's inputRequests.
func (s *Session) detail(op string, raw json.RawMessage, t *Task) error {
	var d struct {
		Result        json.RawMessage            `json:"result"`
		Error         *rpcError                  `json:"error"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
	}
	if err := strictUnmarshal(raw, &d); err != nil {
		return &Error{Op: op, Kind: KindMalformed, Sent: true, Err: fmt.Errorf("%w: task: %v", errMalformed, err)}
	}
	if present(d.Result) {
		t.Result = d.Result
	}
	t.failure = d.Error
	if d.InputRequests != nil {
		if len(d.InputRequests) > maxInputRequests {
			return &Error{Op: op, Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("task asks %d input requests (at most %d)", len(d.InputRequests), maxInputRequests)}
		}
		ir := &InputRequired{Requests: map[string]json.RawMessage{}}
		for k, v := range d.InputRequests {
			ir.Requests[k] = s.c.red.json(v)
		}
		t.Input = ir
	}
	switch {
	case t.Status == TaskCompleted && t.Result == nil:
		return &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "completed task without result"}
	case t.Status == TaskFailed && t.failure == nil:
		return &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "failed task without error"}
	case t.Status == TaskInputRequired && t.Input == nil:
		return &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "input_required task without inputRequests"}
	}
	return nil
}

// TaskOutcome is a terminal 2026-07-28 task's outcome as tasks/get carried
// it: a completed task's result read exactly as a direct tools/call's
// (validate it the same way), or a failed task's JSON-RPC error as the
// tools/call's KindRemoteError (the tool's execution failed: definitive).
// A cancelled task, or one not terminal, is KindMalformed: there is no
// outcome to read.
func (s *Session) TaskOutcome(t *Task) (*CallResult, error) {
	switch {
	case t.Status == TaskCompleted && t.Result != nil:
		return s.callResult(methodTasksGet, t.Result, nil)
	case t.Status == TaskFailed && t.failure != nil:
		red := s.c.red
		return nil, &Error{Op: "tools/call", Kind: KindRemoteError, Code: t.failure.Code, Message: red.cut(t.failure.Message, 1024), Sent: true,
			Data: red.json(nonNull(t.failure.Data))}
	}
	return nil, &Error{Op: methodTasksGet, Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("task %s is %s: no outcome to read", TaskIDDigest(t.ID), t.Status)}
}

// UpdateTask sends tasks/update for taskID with the answers (2026-07-28);
// the server only acknowledges. An unknown task is -32602 (TaskLost).
func (s *Session) UpdateTask(ctx context.Context, taskID string, answers map[string]json.RawMessage, sink Sink) error {
	_, err := s.roundTrip(ctx, methodTasksUpdate, map[string]any{"taskId": taskID, "inputResponses": answers}, sink, s.newID())
	return err
}

// AwaitTask polls a 2026-07-28 task (PollTask) until it is terminal,
// answering every input request it shows by policy p (as an input-required
// result's are: Answer) with tasks/update, each key once (a later poll may
// repeat keys already answered: they are not answered again). observe sees
// every tasks/get answer, as in PollTask. More than 8 updates,
// or an input request agentctl cannot answer, fails (KindUnsupported or
// KindMalformed, Sent: the tool may have run). The last task is returned.
func (s *Session) AwaitTask(ctx context.Context, t *Task, p *ElicitationPolicy, sink Sink, observe func(*Task) error) (*Task, error) {
	answered := map[string]bool{}
	updates := 0
	for {
		next, err := s.PollTask(ctx, t, sink, observe)
		if err != nil || next.Status.Terminal() {
			return next, err
		}
		t = next
		fresh := &InputRequired{Requests: map[string]json.RawMessage{}}
		if t.Input != nil {
			for k, v := range t.Input.Requests {
				if !answered[k] {
					fresh.Requests[k] = v
				}
			}
		}
		if len(fresh.Requests) > 0 {
			if updates++; updates > maxTaskUpdates {
				return t, &Error{Op: methodTasksUpdate, Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("task %s asked for input more than %d times", TaskIDDigest(t.ID), maxTaskUpdates)}
			}
			ans, err := fresh.Answer(p)
			if err != nil {
				return t, err
			}
			if err := s.UpdateTask(ctx, t.ID, ans.Responses, sink); err != nil {
				return t, err
			}
			keys := slices.Collect(maps.Keys(fresh.Requests))
			sort.Strings(keys)
			for _, k := range keys {
				answered[k] = true
			}
		}
		// Still input_required (the update is eventually consistent, or
		// only keys already answered): wait and ask again.
		if err := s.waitPoll(ctx, t.PollInterval); err != nil {
			return t, err
		}
		if next, err = s.GetTask(ctx, t.ID, sink); err != nil {
			return t, err
		}
		t = next
		if observe != nil {
			if err := observe(t); err != nil {
				return t, err
			}
		}
		if t.Status.Terminal() {
			return t, nil
		}
	}
}
