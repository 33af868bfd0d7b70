package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
)

// MCP tasks at 2026-07-28 (the io.modelcontextprotocol/tasks extension,
// declared unless the server's useTasks is never): the server alone decides
// to answer a tools/call with a task. The call then goes through the same
// states and records as a 2025-11-25 task (accepted, polling, …), except
// that tasks/get carries the outcome inline (there is no tasks/result) and
// tasks/cancel is only acknowledged.

// Tasks2026Session is a TaskSession that speaks the 2026-07-28 tasks
// extension.
type Tasks2026Session interface {
	// TaskOutcome reads a terminal task's inline outcome: a completed
	// task's result, or a failed task's error (KindRemoteError).
	TaskOutcome(t *transport.Task) (*transport.CallResult, error)
	// UpdateTask sends tasks/update with the answers to the task's input
	// requests (only acknowledged).
	UpdateTask(ctx context.Context, taskID string, answers map[string]json.RawMessage, sink transport.Sink) error
}

func (n netSession) TaskOutcome(t *transport.Task) (*transport.CallResult, error) {
	return n.s.TaskOutcome(t)
}

// modern reports whether the call's session speaks 2026-07-28.
func (c *call) modern() bool {
	return c.rs != nil && c.rs.sess.Info().ProtocolVersion == transport.Protocol20260728
}

// taskOutcome ends a call whose 2026-07-28 task is terminal with the
// outcome tasks/get carried: a completed task's result is validated like a
// direct result; a failed task's error is the tools/call's, definitive.
func (c *call) taskOutcome(ctx context.Context, t *transport.Task) (any, error) {
	ts, ok := c.rs.sess.(Tasks2026Session)
	if !ok {
		err := &callFailure{kind: transport.KindUnsupported, msg: fmt.Sprintf("task %s: the session cannot read a 2026-07-28 task's outcome", c.taskRef())}
		return nil, c.failWith(fsm.FailPossiblyExecuted, err, err.msg)
	}
	c.viaTask = true
	res, err := ts.TaskOutcome(t)
	switch {
	case err == nil:
		return c.complete(ctx, res)
	case transport.KindOf(err) == transport.KindRemoteError:
		return nil, c.failDefinitive(ctx, err) // the failed task's error is the call's
	}
	c.lastErr = err
	c.rn.pending = append(c.rn.pending, c.errorRecord(err))
	if _, ferr := c.fire(fsm.FailPossiblyExecuted, fmt.Sprintf("task %s: %v", c.taskRef(), err), false); ferr != nil {
		return nil, ferr
	}
	return nil, err
}

// cancelledState asks tasks/get, after a 2026-07-28 tasks/cancel (only
// acknowledged), until the task is terminal or ctx (cancelTaskTimeout)
// ends; the last task seen is returned.
func (c *call) cancelledState(ctx context.Context, ts TaskSession) (*transport.Task, error) {
	t, err := ts.GetTask(ctx, c.taskID, c.rn.sink(c.stream(), c.frameBase()))
	if err != nil || t.Status.Terminal() {
		return t, err
	}
	return ts.PollTask(ctx, t, c.rn.sink(c.stream(), c.frameBase()), nil)
}

// pollAgain is t as polling goes on after tasks/update: asked about again
// after its pollInterval (the update is eventually consistent).
func pollAgain(t *transport.Task) *transport.Task {
	next := *t
	next.Status = transport.TaskWorking
	return &next
}

// updateTask answers the input requests of an input_required 2026-07-28
// task with tasks/update, each key once: the call goes input_required →
// polling (input_answered), the update's frames recorded with it. A task
// that only repeats keys already answered is polled again (answered
// true, nothing sent). Past fsm.MaxInputRounds updates, or input the
// action's elicitation setting cannot give, the call ends as a 2025-11-25
// task asking for input does: tasks/cancel, uncertain (answered false).
func (c *call) updateTask(ctx context.Context, ts TaskSession, t *transport.Task) (answered bool, err error) {
	fresh := &transport.InputRequired{Requests: map[string]json.RawMessage{}}
	for k, v := range t.Input.Requests {
		if !c.updated[k] {
			fresh.Requests[k] = v
		}
	}
	if len(fresh.Requests) == 0 {
		return true, nil
	}
	if _, err := c.fire(fsm.TaskInputRequired, t.StatusMessage, false); err != nil {
		return false, err
	}
	up, ok := ts.(Tasks2026Session)
	var ans *transport.InputAnswer
	if ok && c.updates < fsm.MaxInputRounds {
		ans, err = fresh.Answer(c.rn.wf.Action(c.task).Elicitation.Policy())
	}
	if !ok || c.updates >= fsm.MaxInputRounds || err != nil {
		_, err := c.cancelTask(ctx, ts, "input_required", t.StatusMessage)
		return false, err
	}
	c.updates++
	if c.updated == nil {
		c.updated = map[string]bool{}
	}
	if err := up.UpdateTask(ctx, t.ID, ans.Responses, c.rn.sink(c.stream(), c.frameBase())); err != nil {
		c.lastErr = err
		c.rn.pending = append(c.rn.pending, c.errorRecord(err))
		if _, ferr := c.fire(fsm.FailPossiblyExecuted, fmt.Sprintf("task %s: tasks/update: %v", c.taskRef(), err), false); ferr != nil {
			return false, errors.Join(err, ferr)
		}
		return false, err
	}
	keys := slices.Sorted(maps.Keys(fresh.Requests))
	for _, k := range keys {
		c.updated[k] = true
	}
	_, err = c.fire(fsm.InputAnswered, "tasks/update: "+strings.Join(fresh.Methods(), ", "), false)
	return err == nil, err
}

func (n netSession) UpdateTask(ctx context.Context, taskID string, answers map[string]json.RawMessage, sink transport.Sink) error {
	return n.s.UpdateTask(ctx, taskID, answers, sink)
}
