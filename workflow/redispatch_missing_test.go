package workflow_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// TestRedispatch_ToolMissing: the server restarts (every session forgotten)
// between the catalog and the first tools/call, and comes back without the
// tool. The idempotent call gets a 404, reconnects, finds the tool gone and
// fails with reason tool_missing: the server saw exactly one tools/call.
func TestRedispatch_ToolMissing(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool(nil))
	restarted := false
	restart := func(e events.Event) {
		if e.Type == vocab.TypeSessionCatalog && !restarted {
			restarted = true
			if !srv.RemoveTool("act") {
				t.Errorf("RemoveTool(act) found no tool")
			}
			srv.ExpireSessions()
		}
	}
	db := openDB(t)
	res := runAct(t, db, srv, "idempotent", restart)

	if res.State != workflow.StateFailed || exitCode(res) != workflow.ExitFailed {
		t.Fatalf("state %s exit %d (%v), want failed, exit 4", res.State, exitCode(res), res.Err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), `"act"`) || !strings.Contains(res.Err.Error(), "gone") {
		t.Fatalf("error %v does not name the missing tool", res.Err)
	}
	st := srv.Stats()
	if st.Calls["act"] != 1 || st.Executed["act"] != 0 || st.Initialize != 2 || st.List != 2 {
		t.Fatalf("server saw %d tools/call (%d executed), %d initializations, %d lists; want 1 (0), 2, 2",
			st.Calls["act"], st.Executed["act"], st.Initialize, st.List)
	}
	c := callView(t, db, res.RunID)
	if c.Status != "failed" || c.Generation != 2 || c.Redispatches != 0 || c.Error == nil || !strings.HasPrefix(*c.Error, "tool_missing") {
		t.Fatalf("call = %+v (error %v)", c, missingOr(c.Error))
	}
	got := describeRun(t, db, res.RunID)
	want := []string{
		"mcp.request out tools/call prepared->dispatched",
		"mcp.http_error in tools/call",
		"session.expired",
		"call.error dispatched->reconnecting",
	}
	i := slices.Index(got, "call.prepared")
	if i < 0 || len(got) < i+1+len(want) || !slices.Equal(got[i+1:i+1+len(want)], want) {
		t.Fatalf("events:\n%s\nwant after the dispatch:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if slices.ContainsFunc(got, func(s string) bool { return strings.HasSuffix(s, "reconnecting->redispatched") }) || !slices.Contains(got, "call.error reconnecting->failed") {
		t.Fatalf("events:\n%s", strings.Join(got, "\n"))
	}
	var reasons []string
	for _, p := range runMoves(t, db, res.RunID) {
		if p.To == "failed" {
			reasons = append(reasons, p.Trigger+" / "+p.Reason)
		}
	}
	if len(reasons) != 1 || !strings.HasPrefix(reasons[0], "tool_missing / tool_missing:") || !strings.Contains(reasons[0], `"act"`) {
		t.Fatalf("failing transition trigger / reason = %q, want tool_missing / tool_missing: naming \"act\"", reasons)
	}
}

func missingOr(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}
