package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/internal/tspeer"
	"github.com/agentctl/agentctl/projector"
)

// TestTS_TaskCLI: `mcp call` of the reference server's task-required
// simulate-research-query succeeds as an MCP task, and so does a resume
// after agentctl is killed (SIGKILL) while it polls: the resumed run
// reattaches the recorded session and asks about the same task, so the
// server saw exactly one tools/call, for an at_most_once action.
func TestTS_TaskCLI(t *testing.T) {
	url := tspeer.Start(t)

	t.Run("mcp call", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "a.db")
		out, stderr, code := agentctl(t, "mcp", "call", url, "simulate-research-query", "--args", `{"topic":"x"}`,
			"--idempotency", "at_most_once", "--allow-private", "--db", db, "--output", "json")
		if code != 0 {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
		}
		env := parseRunEnvelope(t, out)
		insp, _, code := agentctl(t, "inspect", env.Data.RunID, "--db", db, "--output", "json")
		if code != 0 || !strings.Contains(insp, `"taskIdDigest": "sha256:`) || !strings.Contains(insp, `"status": "completed"`) {
			t.Fatalf("inspect exit %d:\n%s", code, insp)
		}
		// The replay answers the task (its stage messages, polls and
		// result) from the log: the same task history, no socket.
		out, stderr, code = agentctl(t, "replay", env.Data.RunID, "--db", db, "--output", "json")
		if code != 0 {
			t.Fatalf("replay exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
		}
		rep := parseRunEnvelope(t, out)
		rinsp, _, code := agentctl(t, "inspect", rep.Data.RunID, "--db", db, "--output", "json")
		if code != 0 || strings.Count(rinsp, `"statusMessage"`) != strings.Count(insp, `"statusMessage"`) || !strings.Contains(rinsp, `"status": "completed"`) {
			t.Fatalf("inspect of the replay exit %d:\n%s\nsource:\n%s", code, rinsp, insp)
		}
	})

	t.Run("kill -9 while polling, then resume", func(t *testing.T) {
		dbPath := filepath.Join(t.TempDir(), "a.db")
		wf := writeFile(t, "wf.yaml", workflowYAML(url, step{id: "research", tool: "simulate-research-query", idem: "at_most_once", args: "{topic: mcp}"}))
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, agentctlBin, "run", wf, "--db", dbPath, "--output", "jsonl")
		cmd.Env = cliEnv()
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		seen := false
		for sc.Scan() { // each line is an event, printed after its commit
			if strings.Contains(sc.Text(), `"call.task_status"`) {
				seen = true
				break
			}
		}
		_ = cmd.Process.Kill() // SIGKILL: no deferred code runs
		_ = cmd.Wait()
		if !seen {
			t.Fatal("the run ended before a task status was recorded")
		}
		db := testkit.OpenDB(t, dbPath, events.Options{})
		ids, err := projector.RunIDs(context.Background(), db)
		if err != nil || len(ids) != 1 {
			t.Fatalf("runs %v, %v", ids, err)
		}
		out, stderr, code := agentctl(t, "resume", ids[0], "--db", dbPath, "--output", "json")
		if code != 0 {
			t.Fatalf("resume exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
		}
		evs := runEvents(t, db, ids[0])
		if n := len(frames(t, evs, "tools/call")); n != 1 {
			t.Fatalf("%d tools/call frames, want 1", n)
		}
		if n := len(frames(t, evs, "initialize")); n != 1 {
			t.Fatalf("%d initialize frames, want 1 (resume reattaches)", n)
		}
		log := strings.Join(describe(t, db, ids[0]), "\n")
		if !strings.Contains(log, "session.reattached") || !strings.Contains(log, "run.finished succeeded") {
			t.Fatalf("log:\n%s", log)
		}
		if out, stderr, code := agentctl(t, "replay", ids[0], "--db", dbPath, "--output", "json"); code != 0 {
			t.Fatalf("replay of the resumed run exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
		}
	})
}
