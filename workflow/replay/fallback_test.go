package replay

import (
	"errors"
	"testing"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
)

// TestSessionFailure_OldLogs: a log written before task.finished carried
// errorKind still replays: the kind is the one that gives the run's exit
// code (its class has that code); a recorded kind wins.
func TestSessionFailure_OldLogs(t *testing.T) {
	for _, code := range []int{workflow.ExitFailed, workflow.ExitRemote, workflow.ExitUncertain, workflow.ExitCancelled} {
		src := &replaySource{exitCode: code}
		err := src.sessionFailure("initialize", &sessionFail{msg: "boom"})
		if got := workflow.Class(transport.KindOf(err)).Code(); got != code || err.Error() != "boom" {
			t.Errorf("exit %d: rebuilt %q with kind %s, exit %d", code, err, transport.KindOf(err), got)
		}
		if err := src.sessionFailure("tools/list", nil); err.Error() != "recorded tools/list failure" {
			t.Errorf("exit %d: no message: %q", code, err)
		}
		err = src.sessionFailure("initialize", &sessionFail{msg: "boom", kind: transport.KindUnauthorized, status: 401})
		var te *transport.Error
		if transport.KindOf(err) != transport.KindUnauthorized || !errors.As(err, &te) || te.Status != 401 {
			t.Errorf("exit %d: recorded kind lost: %#v", code, err)
		}
	}
}
