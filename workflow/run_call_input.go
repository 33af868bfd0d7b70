package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
)

// answerInput follows an input-required result (2026-07-28 MRTR): the
// tool has not run. The result (its response frame, held until now) and
// the input_requested transition commit first; past fsm.MaxInputRounds
// the call fails there. The action's elicitation setting answers each
// request; input agentctl cannot give (sampling, roots) fails the call
// definitively, and a cancel ends it cancelled. Otherwise input_answered
// is pending, committed with the re-issued request's frame (a new id,
// the answers and the exact requestState), which the caller sends next.
func (c *call) answerInput(ctx context.Context, ir *transport.InputRequired) error {
	reason := "input requested: " + strings.Join(ir.Methods(), ", ")
	if _, err := c.fire(fsm.InputRequested, reason, false); err != nil {
		return err
	}
	if c.m.State == fsm.Failed {
		err := &callFailure{kind: transport.KindUnsupported,
			msg: fmt.Sprintf("%s: server %q asked tool %q for input %d times; the tool has not run", fsm.ReasonInputRoundsExceeded, c.remote, c.tool.Name, c.m.InputRounds)}
		c.lastErr = err
		return err
	}
	if ctx.Err() != nil {
		err := fmt.Errorf("%s: cancelled while answering an input request; the tool has not run: %w", fsm.ReasonCancelledBeforeSend, context.Cause(ctx))
		c.noteUserCancel(ctx)
		return c.stopBeforeSend(ctx, err)
	}
	ans, err := ir.Answer(c.rn.wf.Action(c.task).Elicitation.Policy())
	if err != nil {
		var te *transport.Error
		if errors.As(err, &te) {
			err = &callFailure{kind: te.Kind, msg: te.Message, err: err}
		}
		return c.failDefinitive(ctx, err)
	}
	c.input = ans
	_, err = c.fire(fsm.InputAnswered, "answers: "+strings.Join(ir.Methods(), ", "), true)
	return err
}
