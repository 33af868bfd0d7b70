package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_UnknownSubcommandExit2: every command group refuses an unknown
// subcommand with exit 2 and a message naming it, and prints its help
// (exit 0) when given none.
func TestCLI_UnknownSubcommandExit2(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	for _, group := range [][]string{{"runs"}, {"effects"}, {"audit"}, {"db"}, {"db", "encryption"}, {"mcp"}, {"demo"}} {
		args := append(append([]string{}, group...), "delete", "x", "--db", db)
		out, stderr, code := cli(t, args...)
		if code != 2 || !strings.Contains(stderr, `"delete"`) || out != "" {
			t.Errorf("%v: exit %d, want 2 naming the subcommand; stdout %q stderr %q", args, code, out, stderr)
		}
		if group[0] == "demo" {
			continue // demo without a subcommand runs the demo
		}
		out, _, code = cli(t, append(append([]string{}, group...), "--db", db)...)
		if code != 0 || !strings.Contains(out, "Available Commands") {
			t.Errorf("%v: exit %d, want its help: %s", group, code, out)
		}
	}
}

// listRunIDs returns `runs list` ids with the given filter flags.
func listRunIDs(t *testing.T, db string, flags ...string) []string {
	t.Helper()
	out, stderr, code := cli(t, append([]string{"runs", "list", "--db", db, "--output", "json"}, flags...)...)
	if code != 0 {
		t.Fatalf("runs list %v: exit %d %s", flags, code, stderr)
	}
	var env struct {
		Data []struct {
			RunID string `json:"runId"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatal(err)
	}
	ids := []string{}
	for _, r := range env.Data {
		ids = append(ids, r.RunID)
	}
	return ids
}

// TestCLI_RunsListFilters: --state, --workflow, --since and --limit
// select from the runs projection, newest first; bad values exit 2.
func TestCLI_RunsListFilters(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	srv := mcptest.Start(t, mcptest.Options{}, failingTool())
	db := filepath.Join(t.TempDir(), "a.db")
	var ok []string
	for range 2 {
		if _, stderr, code := cli(t, "run", writeWorkflow(t, url), "--input", "query=x", "--db", db); code != 0 {
			t.Fatalf("run: %s", stderr)
		}
		ok = append([]string{listRunIDs(t, db, "--limit", "1")[0]}, ok...)
	}
	if _, _, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db); code != 4 {
		t.Fatalf("failing run exit %d, want 4", code)
	}
	failed := listRunIDs(t, db, "--limit", "1")[0]
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, []string{failed, ok[0], ok[1]}},
		{[]string{"--state", "succeeded"}, ok},
		{[]string{"--state", "failed"}, []string{failed}},
		{[]string{"--state", "succeeded", "--limit", "1"}, ok[:1]},
		{[]string{"--workflow", "act-once"}, []string{failed}},
		{[]string{"--workflow", "nope"}, []string{}},
		{[]string{"--since", "1h"}, []string{failed, ok[0], ok[1]}},
		{[]string{"--since", "7d", "--state", "failed"}, []string{failed}},
	} {
		if got := listRunIDs(t, db, tc.flags...); strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("runs list %v = %v, want %v", tc.flags, got, tc.want)
		}
	}
	// --since is exact below the second: nothing started from now on.
	if got := listRunIDs(t, db, "--since", "0s"); len(got) != 0 {
		t.Errorf("runs list --since 0s = %v, want none started from now on", got)
	}
	for _, flags := range [][]string{{"--state", "done"}, {"--since", "yesterday"}, {"--limit", "-1"}} {
		if _, stderr, code := cli(t, append([]string{"runs", "list", "--db", db}, flags...)...); code != 2 || !strings.Contains(stderr, flags[0]) {
			t.Errorf("runs list %v: exit %d %s", flags, code, stderr)
		}
	}
}
