package workflow

import (
	"context"
	"fmt"

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
