package workflow

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/workflow/spec"
)

// resumedCall rebuilds the call of an interrupted attempt from its events:
// identity, arguments and schema digest from call.prepared, the machine
// (state and redispatch budget) from its transitions, the tool from the
// catalog recorded for the session it was prepared on.
func (rn *run) resumedCall(t spec.TaskSpec, lc *loggedCall) (*call, error) {
	tool, ok := rn.log.tool(lc)
	if !ok {
		return nil, fmt.Errorf("call %s: tool %q is not in the recorded catalog of %s generation %d",
			lc.prep.EffectID, lc.prep.Tool, lc.prep.Server, lc.prep.Generation)
	}
	c := &call{rn: rn, task: t, attempt: lc.prep.Attempt, remote: lc.prep.Server, gen: lc.gen, tool: tool,
		schemaDigest: lc.prep.SchemaDigest, args: lc.prep.Arguments, m: lc.m, effectID: lc.prep.EffectID}
	if n := len(lc.transitions); n > 0 {
		c.reason = lc.transitions[n-1].Reason
	}
	for _, tr := range lc.transitions {
		c.sent = c.sent || tr.To == fsm.Dispatched
	}
	c.useTask, _ = c.decideTask() // a resend is a task again, as first sent
	return c, nil
}

// resume carries an interrupted call on from the state the log left it in.
func (c *call) resume(ctx context.Context, lc *loggedCall) (any, error) {
	if c.m.State == fsm.InputRequired && c.m.ByInputResult {
		// Interrupted while answering an input-required result: the tool
		// has not run, so the call fails definitively (a retry may follow).
		return nil, c.failDefinitive(ctx, &callFailure{kind: "interrupted",
			msg: fmt.Sprintf("%s while answering an input request of tool %q; the tool has not run", ReasonInterrupted, c.tool.Name)})
	}
	switch c.m.State {
	case fsm.Prepared:
		return c.resumePrepared(ctx)
	case fsm.Dispatched, fsm.Redispatched:
		if lc.result != nil { // the response reached the log: never resend
			return c.conclude(ctx, *lc.result)
		}
		trigger, reason := fsm.FailAmbiguous, ReasonInterrupted
		if lc.possiblyExecuted != 0 { // the server answered 5xx before the process ended
			trigger, reason = fsm.FailPossiblyExecuted, fmt.Sprintf("%s after HTTP %d (possibly executed)", ReasonInterrupted, lc.possiblyExecuted)
		}
		dec, err := c.fire(trigger, reason, false)
		if err != nil {
			return nil, err
		}
		if dec != fsm.DecideReconnect {
			return nil, &callFailure{kind: "interrupted", msg: c.lastReason()}
		}
		fallthrough
	case fsm.Reconnecting:
		if err := c.reconnect(ctx); err != nil {
			return nil, err
		}
		return c.send(ctx)
	case fsm.Accepted, fsm.Polling, fsm.InputRequired, fsm.Cancelling:
		return c.resumeTask(ctx, lc)
	case fsm.Succeeded:
		switch {
		case lc.reconciled != nil:
			return decodeOutput(lc.reconciled.Result)
		case lc.result != nil:
			c.ofResult = true
			return decodeOutput(lc.result.Output)
		}
		return nil, fmt.Errorf("call %s succeeded but its result is not in the log", c.effectID)
	}
	// Failed, uncertain or cancelled before the process ended: the attempt
	// ends the same way.
	return nil, &callFailure{kind: "recorded", msg: c.lastReason()}
}

// resumePrepared sends a call that was recorded but never dispatched, on a
// new session whose catalog must still carry the tool with the digest
// recorded at prepared; otherwise it fails and nothing is sent.
func (c *call) resumePrepared(ctx context.Context) (any, error) {
	rs, err := c.rn.session(ctx, c.remote, c.task.ID, c.attempt)
	if err != nil {
		return nil, err
	}
	c.rs, c.gen = rs, rs.gen
	tool, _, f := c.sameTool(rs, false)
	if f != nil {
		return nil, c.failDefinitive(ctx, f)
	}
	c.tool = tool
	return c.dispatch(ctx)
}

// lastReason is the reason of the call's last transition, for errors.
func (c *call) lastReason() string {
	if c.reason != "" {
		return c.reason
	}
	return string(c.m.State)
}
