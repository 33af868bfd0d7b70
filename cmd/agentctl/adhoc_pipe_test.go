package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// closedStdoutRun runs agentctl with --output jsonl into a pipe whose
// reader is already gone (`| head` that exited), and returns its exit code
// and stderr.
func closedStdoutRun(t *testing.T, args ...string) (int, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	cmd := subprocess(t, args...)
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	w.Close()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// runState reads a run's state from the runs projection.
func runState(t *testing.T, db, runID string) string {
	t.Helper()
	out, stderr, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect %s: exit %d %s", runID, code, stderr)
	}
	return envelopeData(t, out)["run"].(map[string]any)["state"].(string)
}

// TestCLI_AdhocClosedStdout: `mcp tools|call --output jsonl` whose stdout
// reader is gone ends the run (recorded, not left running) instead of dying
// of SIGPIPE; resume then completes it; and a listing replays.
func TestCLI_AdhocClosedStdout(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"tools", []string{"mcp", "tools", srv.URL, "--allow-private"}},
		{"call", []string{"mcp", "call", srv.URL, "act", "--idempotency", "at_most_once", "--allow-private"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "a.db")
			callsBefore := srv.Stats().Calls["act"]
			code, stderr := closedStdoutRun(t, append(tc.args, "--db", db, "--output", "jsonl")...)
			ids := runIDs(t, db)
			if code != 130 || len(ids) != 1 {
				t.Fatalf("closed stdout: exit %d, runs %v; want 130 and one run\n%s", code, ids, stderr)
			}
			if st := runState(t, db, ids[0]); st != "cancelled" {
				t.Fatalf("run left %s, want cancelled", st)
			}
			if _, stderr, code := cli(t, "resume", ids[0], "--db", db); code != 0 {
				t.Fatalf("resume: exit %d\n%s", code, stderr)
			}
			if st := runState(t, db, ids[0]); st != "succeeded" {
				t.Fatalf("after resume the run is %s", st)
			}
			if tc.name == "call" {
				if n := srv.Stats().Calls["act"] - callsBefore; n != 1 {
					t.Fatalf("server ran act %d times, want 1", n)
				}
				return
			}
			out, stderr, code := cli(t, "replay", ids[0], "--db", db, "--output", "json")
			if code != 0 || envelopeData(t, out)["state"] != "succeeded" {
				t.Fatalf("replay of a listing: exit %d\n%s\n%s", code, out, stderr)
			}
		})
	}
}
