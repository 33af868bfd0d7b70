package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// researchTool is a tool that must be called as an MCP task.
func researchTool() mcptest.ToolDef {
	t := actTool()
	t.Name, t.Execution = "research", json.RawMessage(`{"taskSupport":"required"}`)
	return t
}

func researchWorkflow(t *testing.T, url, idem string) string {
	t.Helper()
	return testkit.Workflow{Name: "research-once", URL: url,
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: "research", Arguments: "{n: 1}"}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
}

// TestCLI_TaskCrashResume kills agentctl while it polls a task (right after
// the commit that records the task working), then resumes: for every
// class the run reattaches the recorded session (no new initialize) and
// polls the same task; the server saw exactly one tools/call.
func TestCLI_TaskCrashResume(t *testing.T) {
	for _, idem := range allClasses {
		t.Run(idem, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 4, PollInterval: 10}}, researchTool())
			db := t.TempDir() + "/a.db"
			runID := crashRun(t, db, researchWorkflow(t, srv.URL, idem), "call.transition accepted->polling")
			code, data, stderr := resumeJSON(t, db, runID)
			if code != 0 || data["state"] != "succeeded" {
				t.Fatalf("resume exit %d, data %v\n%s", code, data, stderr)
			}
			st, ts := srv.Stats(), srv.TaskStats()
			if st.Calls["research"] != 1 || st.Executed["research"] != 1 || st.Initialize != 1 || ts.Created != 1 || ts.Results != 1 {
				t.Fatalf("server saw calls %d, executed %d, initialize %d, tasks %+v", st.Calls["research"], st.Executed["research"], st.Initialize, ts)
			}
			log := strings.Join(describe(t, db, runID), "\n")
			if strings.Count(log, "mcp.request out tools/call") != 1 || strings.Count(log, "session.reattached") != 1 ||
				!strings.Contains(log, "call.transition polling->polling") {
				t.Fatalf("log:\n%s", log)
			}
			out, _, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
			if code != 0 || !strings.Contains(out, `"taskId": "mcptest-task-1"`) || !strings.Contains(out, `"taskIdDigest": "sha256:`) {
				t.Fatalf("inspect exit %d:\n%s", code, out)
			}
			// The session id (a bearer credential) is in the log, sealed when
			// encryption is on; inspect shows only its digest.
			sid := ""
			for _, r := range st.Requests {
				if r.RPCMethod == "tasks/get" {
					sid = r.Session
				}
			}
			if sid == "" || strings.Contains(out, sid) {
				t.Fatalf("inspect prints the raw session id %q (or none was used)", sid)
			}
		})
	}
}

// TestCLI_TaskCrashResumeSessionGone: the server forgot the session while
// agentctl was down (404 on the reattached session's first tasks/get):
// the task is lost; at_most_once ends uncertain, idempotent is sent again.
func TestCLI_TaskCrashResumeSessionGone(t *testing.T) {
	for _, tc := range []struct {
		idem        string
		code, calls int
	}{{"at_most_once", 3, 1}, {"idempotent", 0, 2}} {
		t.Run(tc.idem, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 4, PollInterval: 10}}, researchTool())
			db := t.TempDir() + "/a.db"
			runID := crashRun(t, db, researchWorkflow(t, srv.URL, tc.idem), "call.transition accepted->polling")
			srv.Inject(mcptest.Fault{RPCMethod: "tasks/get", Nth: 1, Status: http.StatusNotFound})
			code, _, stderr := resumeJSON(t, db, runID)
			if code != tc.code {
				t.Fatalf("resume exit %d, want %d\n%s", code, tc.code, stderr)
			}
			if tc.code == 3 && !strings.Contains(stderr, "task_lost") {
				t.Fatalf("stderr lacks task_lost:\n%s", stderr)
			}
			if n := srv.Stats().Executed["research"]; n != tc.calls {
				t.Fatalf("executed %d, want %d", n, tc.calls)
			}
		})
	}
}
