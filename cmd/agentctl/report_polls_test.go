package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_ReportTaskPolls: a call made as an MCP task that the server
// answers "working" many times over: the log folds the identical polls (only
// status changes keep their frames), and the report's task-polls marker
// counts every poll the server answered, as inspect does, not only those
// whose frames were kept.
func TestCLI_ReportTaskPolls(t *testing.T) {
	const working = 12
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: working, PollInterval: 1}}, researchTool())
	db := filepath.Join(t.TempDir(), "a.db")
	runID := runFor(t, 0, "run", researchWorkflow(t, srv.URL, "at_most_once"), "--db", db)
	gets := 0
	for _, r := range srv.Stats().Requests {
		if r.RPCMethod == "tasks/get" {
			gets++
		}
	}
	if gets <= working {
		t.Fatalf("the server answered %d tasks/get, want more than %d", gets, working)
	}
	insp, stderr, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(insp, `"polls": `+itoa(gets)) {
		t.Fatalf("inspect: exit %d %s: no \"polls\": %d in\n%s", code, stderr, gets, insp)
	}
	shown := textOf(t, htmlReport(t, db, runID))
	if want := "task polls " + itoa(gets) + " "; !strings.Contains(shown, want) {
		i := strings.Index(shown, "task polls")
		t.Errorf("the report lacks %q (the marker row with every poll counted); it shows %q", want, shown[i:min(len(shown), i+80)])
	}
}
