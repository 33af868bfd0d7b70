package main

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// column returns the byte offset at which field starts in line, or -1.
func column(line, field string) int { return strings.Index(line, field) }

// TestCLI_HumanTables: inspect counts MCP sessions (not one row per task
// that used the session) and aligns its tables whatever the tool names'
// length; effects list has a header row and aligned columns.
func TestCLI_HumanTables(t *testing.T) {
	long := actTool()
	long.Name = "a_tool_with_a_name_much_longer_than_the_old_column"
	srv := mcptest.Start(t, mcptest.Options{}, actTool(), long)
	db := filepath.Join(t.TempDir(), "a.db")
	wf := testkit.Workflow{Name: "tables", URL: srv.URL, Tasks: []testkit.Task{
		{ID: "first", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 1}"},
		{ID: "second_task_with_a_long_id", Idempotency: "idempotent", Tool: long.Name, Arguments: "{n: 2}"},
		{ID: "third", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 3}"},
	}}.WriteFile(t)
	if _, stderr, code := cli(t, "run", wf, "--db", db); code != 0 {
		t.Fatalf("run: exit %d %s", code, stderr)
	}
	if n := srv.Stats().Initialize; n != 1 {
		t.Fatalf("server saw %d sessions, want 1", n)
	}
	out, stderr, code := cli(t, "inspect", "last", "--db", db)
	if code != 0 {
		t.Fatalf("inspect: exit %d %s", code, stderr)
	}
	if !regexp.MustCompile(`calls 3   sessions 1\n`).MatchString(out) {
		t.Fatalf("inspect does not count one session:\n%s", out)
	}
	_, calls, _ := strings.Cut(out, "\ncalls\n")
	var rows []string
	for _, l := range strings.Split(calls, "\n") {
		if regexp.MustCompile(`^  [0-9a-f]{12}  `).MatchString(l) {
			rows = append(rows, l)
		}
	}
	if len(rows) != 3 {
		t.Fatalf("calls table rows = %q", rows)
	}
	for _, field := range []string{"idempotent", "gen 1", "succeeded", "reconnects 0"} {
		at := column(rows[0], field)
		for _, r := range rows[1:] {
			if column(r, field) != at || at < 0 {
				t.Fatalf("column %q not aligned:\n%s", field, strings.Join(rows, "\n"))
			}
		}
	}

	out, stderr, code = cli(t, "effects", "list", "last", "--db", db)
	if code != 0 {
		t.Fatalf("effects list: exit %d %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 4 || !regexp.MustCompile(`^CALL +TASK +ATTEMPT +TOOL +IDEMPOTENCY +STATUS +GEN +REDISPATCHES$`).MatchString(lines[0]) {
		t.Fatalf("effects list has no header row:\n%s", out)
	}
	for _, h := range []string{"TASK", "TOOL", "STATUS", "REDISPATCHES"} {
		at := column(lines[0], h)
		for _, l := range lines[1:] {
			if l[at-2:at] != "  " || l[at] == ' ' {
				t.Fatalf("column %s not aligned:\n%s", h, out)
			}
		}
	}
}
