package e2e

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/workflow"
)

// withoutProgress drops progress notifications, whose number depends on
// how far the handler got before the session closed.
func withoutProgress(log []string) []string {
	var out []string
	for _, l := range log {
		if l != "mcp.notification in notifications/progress" {
			out = append(out, l)
		}
	}
	return out
}

// TestGoSDK_SessionLostMidCall: the server closes the session while the
// tool runs, right after agentctl persisted the call's first progress
// event (the hook is the runner's observer), so the handler executed but
// its response never arrives and the Go SDK gives no event id to resume
// from. That is an ambiguous transport_loss: an at_most_once call ends
// uncertain (exit 3) after exactly one execution; an idempotent one is
// resent once on generation 2 and succeeds (two executions, as declared safe).
func TestGoSDK_SessionLostMidCall(t *testing.T) {
	for _, tc := range []struct {
		idem  string
		code  int
		calls int64
		tail  []string
	}{
		{"at_most_once", workflow.ExitUncertain, 1, lines("call.error dispatched->uncertain",
			"task.finished count uncertain", "run.finished uncertain")},
		{"idempotent", workflow.ExitOK, 2, concat(lines("call.error dispatched->reconnecting"), openSession(1),
			lines("mcp.request out tools/call reconnecting->redispatched", "mcp.response in", "call.result redispatched->succeeded", "task.finished count succeeded", "run.finished succeeded"))},
	} {
		t.Run(tc.idem, func(t *testing.T) {
			srv, url := demotest.StartTest(t, demoserver.Options{StepDelay: 20 * time.Millisecond})
			var closed atomic.Bool
			observe := func(e events.Event) {
				if e.Type == vocab.FramePrefix+"notification" && strings.Contains(string(e.Payload), "notifications/progress") && !closed.Swap(true) {
					for ss := range srv.MCPServer().Sessions() {
						_ = ss.Close()
					}
				}
			}
			res, db := runWorkflow(t, context.Background(), workflowYAML(url, step{id: "count", tool: "analyze", idem: tc.idem, args: `{text: "a b", steps: 10}`}), observe)
			log := describe(t, db, res.RunID)
			if code := exitCode(res); code != tc.code {
				t.Fatalf("exit %d (%v), want %d\n%s", code, res.Err, tc.code, numbered(log))
			}
			want := concat(lines("run.created", "task.started count"), openSession(1),
				lines("call.prepared", "mcp.request out tools/call prepared->dispatched"), tc.tail)
			if got := withoutProgress(log); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("event log (progress omitted):\n%s\nwant:\n%s", numbered(got), numbered(want))
			}
			errs := decodeAll[vocab.CallError](t, runEvents(t, db, res.RunID), vocab.TypeCallError)
			if len(errs) != 1 || errs[0].Kind != "transport_loss" {
				t.Fatalf("call.error = %+v, want one transport_loss", errs)
			}
			if n := srv.Calls("analyze"); n != tc.calls {
				t.Fatalf("server ran analyze %d times, want %d", n, tc.calls)
			}
		})
	}
}
