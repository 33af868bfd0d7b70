package main

import (
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// research2026Workflow is researchWorkflow pinned to 2026-07-28.
func research2026Workflow(t *testing.T, url, idem string) string {
	t.Helper()
	return testkit.Workflow{Name: "research-once", URL: url, ServerKeys: []string{"protocolVersion: 2026-07-28"},
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: "research", Arguments: "{n: 1}"}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
}

// TestCLI_Task2026CrashResume kills agentctl while it polls a 2026-07-28
// task (the tasks extension; right after the commit that records the task
// working), then resumes: there is no session to reattach, so resume asks
// about the same task on a new connection, for every class, and the
// server saw exactly one tools/call and one execution; the outcome is read
// from tasks/get (no tasks/result exists at 2026-07-28).
func TestCLI_Task2026CrashResume(t *testing.T) {
	for _, tc := range []struct{ at, name string }{{"call.task_accepted dispatched->accepted", "accepted"}, {"call.transition accepted->polling", "polling"}} {
		for _, idem := range allClasses {
			t.Run(tc.name+"/"+idem, func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{ProtocolVersion: mcptest.Protocol20260728, Tasks: &mcptest.TaskOptions{WorkingPolls: 4, PollInterval: 10}}, researchTool())
				db := t.TempDir() + "/a.db"
				runID := crashRun(t, db, research2026Workflow(t, srv.URL, idem), tc.at)
				code, data, stderr := resumeJSON(t, db, runID)
				if code != 0 || data["state"] != "succeeded" {
					t.Fatalf("resume exit %d, data %v\n%s", code, data, stderr)
				}
				st, ts := srv.Stats(), srv.TaskStats()
				if st.Calls["research"] != 1 || st.Executed["research"] != 1 || ts.Created != 1 || ts.Results != 0 || ts.Gets < 5 {
					t.Fatalf("server saw calls %d, executed %d, tasks %+v", st.Calls["research"], st.Executed["research"], ts)
				}
				lines := describe(t, db, runID)
				log := strings.Join(lines, "\n")
				if strings.Count(log, "mcp.request out tools/call") != 1 || strings.Count(log, "session.reattached") != 0 ||
					!logNames(lines, "call.result polling->succeeded") {
					t.Fatalf("log:\n%s", log)
				}
				// The resumed run replays from its log alone, to the same end.
				if rcode, _, _ := replayCLI(t, db, runID); rcode != 0 {
					t.Fatalf("replay of the resumed run: exit %d", rcode)
				}
				out, _, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
				if code != 0 || !strings.Contains(out, `"taskId": "mcptest-task-1"`) {
					t.Fatalf("inspect exit %d:\n%s", code, out)
				}
			})
		}
	}
}
