package main

import (
	"slices"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/internal/tspeer"
)

// ts2026Workflow is one task calling tool on a remote pinned to 2026-07-28.
func ts2026Workflow(t *testing.T, url, tool, idem string) string {
	t.Helper()
	return testkit.Workflow{Name: "ts2026", URL: url, ServerKeys: []string{`protocolVersion: "2026-07-28"`},
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: tool, Arguments: "{n: 1}"}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
}

// TestCLI_TS2026 runs against the TypeScript SDK v2 server speaking only
// 2026-07-28 (interop/ts2026): a run, its replay (no request reaches the
// server), and agentctl killed with SIGKILL after a call's progress frame
// was committed (the tool ran), then resumed and replayed: an idempotent
// call is re-issued once (two executions, server-counted), an at_most_once
// one ends uncertain (one execution); the replay ends as the resume did.
func TestCLI_TS2026(t *testing.T) {
	t.Parallel()
	b := testkit.Backends(t)[0] // SQLite: the backends are TestCLI_CrashMatrix's dimension
	t.Run("run-replay", func(t *testing.T) {
		t.Parallel()
		peer := tspeer.StartTS2026(t)
		db := b.DSN(t)
		if _, stderr, code := cli(t, "run", ts2026Workflow(t, peer.URL, "act", "at_most_once"), "--db", db, "--output", "json"); code != 0 {
			t.Fatalf("run: exit %d: %s", code, stderr)
		}
		if n := peer.Counts(t)["act"]; n != 1 {
			t.Fatalf("act ran %d times, want 1", n)
		}
		runID := runIDs(t, db)[0]
		if !slices.Contains(describeAll(logOf(t, db, runID)), "mcp.request out server/discover") {
			t.Fatal("the run did not open with server/discover")
		}
		if code, _, _ := replayCLI(t, db, runID); code != 0 {
			t.Fatalf("replay: exit %d", code)
		}
		if n := peer.Counts(t)["act"]; n != 1 {
			t.Fatalf("after the replay act ran %d times, want 1", n)
		}
	})
	for _, tc := range []struct {
		idem       string
		code, runs int
	}{{"idempotent", 0, 2}, {"at_most_once", 3, 1}} {
		t.Run("kill-resume-replay/"+tc.idem, func(t *testing.T) {
			t.Parallel()
			peer := tspeer.StartTS2026(t)
			db := b.DSN(t)
			killedAt(t, "mcp.notification in notifications/progress", "run", ts2026Workflow(t, peer.URL, "slow", tc.idem), "--db", db, "--output", "json")
			if n := peer.Counts(t)["slow"]; n != 1 {
				t.Fatalf("before the resume slow ran %d times, want 1", n)
			}
			runID := runIDs(t, db)[0]
			before := logOf(t, db, runID)
			code, _, stderr := resumeJSON(t, db, runID)
			if code != tc.code {
				t.Fatalf("resume: exit %d, want %d: %s", code, tc.code, stderr)
			}
			assertSound(t, db, runID, before)
			if n := peer.Counts(t)["slow"]; n != tc.runs {
				t.Fatalf("slow ran %d times in all, want %d", n, tc.runs)
			}
			if rcode, _, _ := replayCLI(t, db, runID); rcode != tc.code {
				t.Fatalf("replay: exit %d, want %d", rcode, tc.code)
			}
			if n := peer.Counts(t)["slow"]; n != tc.runs {
				t.Fatalf("after the replay slow ran %d times, want %d", n, tc.runs)
			}
		})
	}
}
