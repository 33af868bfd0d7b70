package e2e

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/tspeer"
	"github.com/agentctl/agentctl/workflow"
)

// onlyRun returns the id of the single run recorded in the database at path.
func onlyRun(tb testing.TB, path string) (string, []string) {
	tb.Helper()
	db := openDBAt(tb, path)
	var ids []string
	if err := db.SQL().Select(&ids, `SELECT DISTINCT run_id FROM events`); err != nil {
		tb.Fatalf("list runs: %v", err)
	}
	if len(ids) != 1 {
		tb.Fatalf("database holds runs %q, want exactly one", ids)
	}
	return ids[0], describe(tb, db, ids[0])
}

// errorEnvelope is what agentctl prints on stderr for a failure with --output json.
type errorEnvelope struct {
	Kind  string `json:"kind"`
	OK    bool   `json:"ok"`
	Error struct {
		Message  string `json:"message"`
		ExitCode int    `json:"exitCode"`
		RunID    string `json:"runId"`
	} `json:"error"`
}

func parseErrorEnvelope(tb testing.TB, stderr string) errorEnvelope {
	tb.Helper()
	var env errorEnvelope
	if err := json.Unmarshal([]byte(strings.TrimSpace(stderr)), &env); err != nil || env.Kind != "Error" || env.OK {
		tb.Fatalf("stderr is not one Error envelope (%v):\n%s", err, stderr)
	}
	return env
}

// TestCLI_TSEverything runs `agentctl run` as a subprocess against the
// reference TypeScript server and checks exit codes and what a human sees.
func TestCLI_TSEverything(t *testing.T) {
	url := tspeer.Start(t)

	exits := []struct {
		name    string
		st      step
		code    int
		message string
	}{
		{"get-sum/valid", step{id: "sum", tool: "get-sum", idem: "pure", args: "{a: 2, b: 3.5}"}, workflow.ExitOK, ""},
		{"get-sum/invalid", step{id: "sum", tool: "get-sum", idem: "pure", args: "{a: 2}"}, workflow.ExitFailed, `missing property 'b'`},
		{"isError", step{id: "ref", tool: "get-resource-reference", idem: "pure", args: "{resourceId: 1.5}"}, workflow.ExitFailed, "Invalid resourceId: 1.5"},
		{"unknown-tool", step{id: "x", tool: "nope", idem: "pure"}, workflow.ExitFailed, `tool "nope" not found on server "peer"; available: ` + tsTools},
	}
	for _, tc := range exits {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "a.db")
			wf := writeFile(t, "wf.yaml", workflowYAML(url, tc.st))
			stdout, stderr, code := agentctl(t, "run", wf, "--db", db, "--output", "json")
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, stdout, stderr)
			}
			env := parseRunEnvelope(t, stdout)
			if env.Data.ExitCode != tc.code {
				t.Errorf("envelope exitCode %d, want %d", env.Data.ExitCode, tc.code)
			}
			if tc.code == workflow.ExitOK {
				if got := outputString(t, env.Data.Outputs["sum"]); got != `[{"text":"The sum of 2 and 3.5 is 5.5.","type":"text"}]` {
					t.Fatalf("outputs = %s", got)
				}
				return
			}
			e := parseErrorEnvelope(t, stderr)
			if e.Error.ExitCode != tc.code || e.Error.RunID != env.Data.RunID || !strings.Contains(e.Error.Message, tc.message) {
				t.Fatalf("error envelope = %+v, want exit %d, run %s, message containing %q", e.Error, tc.code, env.Data.RunID, tc.message)
			}
		})
	}

	// Progress is shown on stderr as each notification is persisted.
	t.Run("progress-live", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "a.db")
		wf := writeFile(t, "wf.yaml", workflowYAML(url, step{id: "op", tool: "trigger-long-running-operation", idem: "pure", args: "{duration: 0.4, steps: 4}"}))
		_, stderr, code := agentctl(t, "run", wf, "--db", db)
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		var progress []string
		for _, l := range strings.Split(stderr, "\n") {
			if strings.HasPrefix(l, "  progress ") {
				progress = append(progress, strings.TrimSpace(l))
			}
		}
		if strings.Join(progress, "|") != "progress 1/4|progress 2/4|progress 3/4|progress 4/4" {
			t.Fatalf("progress lines %q in stderr:\n%s", progress, stderr)
		}
		if i, j := strings.Index(stderr, "progress 4/4"), strings.Index(stderr, "  op succeeded"); j < 0 || i > j {
			t.Fatalf("progress should precede the task's end:\n%s", stderr)
		}
		_, log := onlyRun(t, db)
		if n := count(log, "mcp.notification in notifications/progress"); n != 4 {
			t.Fatalf("%d progress events persisted, want 4", n)
		}
	})

	// SIGINT while the tool runs: agentctl sends notifications/cancelled,
	// the call (which may have run) ends uncertain, never resent, and the
	// process exits 130. We wait for the first progress line on stderr,
	// which proves the call is in flight, then interrupt.
	t.Run("sigint", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "a.db")
		wf := writeFile(t, "wf.yaml", workflowYAML(url, step{id: "op", tool: "trigger-long-running-operation", idem: "idempotent", args: "{duration: 60, steps: 300}"}))
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, agentctlBin, "run", wf, "--db", db)
		cmd.Env = cliEnv()
		errPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lr := newLineReader(errPipe)
		deadline := time.After(30 * time.Second)
		lr.waitFor(t, deadline, "a progress line", func(l string) bool { return strings.HasPrefix(l, "  progress 1/300") })
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		rest := lr.rest()
		err = cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if ctx.Err() != nil {
			t.Fatalf("agentctl did not exit after SIGINT: %v", err)
		}
		runID, log := onlyRun(t, db)
		t.Logf("exit %d; stderr after SIGINT:\n%s", code, strings.Join(rest, "\n"))
		// What must hold whatever the exit code: the cancel went out, the
		// call is not succeeded/failed, and it was sent exactly once.
		if n := count(log, "mcp.notification out notifications/cancelled"); n != 1 {
			t.Errorf("%d notifications/cancelled sent, want 1:\n%s", n, numbered(log))
		}
		if n := count(log, "mcp.request out tools/call"); n != 1 {
			t.Errorf("%d tools/call requests, want 1", n)
		}
		if count(log, "call.transition dispatched->uncertain") != 1 {
			t.Errorf("call should end dispatched->uncertain:\n%s", numbered(log))
		}
		assertCancelledNotice(t, db, runID)
		// The user's cancel made the call uncertain: the run still exits 130
		// and finishes "cancelled" ((*call).exitCode checks the cancel first).
		if code != workflow.ExitCancelled {
			t.Errorf("exit %d, want %d (cancelled); run %s", code, workflow.ExitCancelled, runID)
		}
		if last := log[len(log)-1]; last != "run.finished cancelled" {
			t.Errorf("run ends with %q, want run.finished cancelled", last)
		}
	})
}

// TestCLI_GoSDK checks the CLI's exit codes against the Go SDK server: 0 for
// a clean run, 4 for an isError result, 3 when an at_most_once call meets an
// expired session.
func TestCLI_GoSDK(t *testing.T) {
	t.Run("ok", func(t *testing.T) {
		_, url := demotest.StartTest(t, demoserver.Options{JSONResponse: true})
		wf := writeFile(t, "wf.yaml", workflowYAML(url, step{id: "find", tool: "search", idem: "pure", args: "{q: cli}"}))
		stdout, stderr, code := agentctl(t, "run", wf, "--db", filepath.Join(t.TempDir(), "a.db"), "--output", "json")
		if code != 0 {
			t.Fatalf("exit %d\n%s", code, stderr)
		}
		if env := parseRunEnvelope(t, stdout); env.Data.State != "succeeded" || outputString(t, env.Data.Outputs["find"]) != `{"id":"`+demoserver.DocID("cli")+`","score":0.9,"title":"About cli"}` {
			t.Fatalf("envelope = %+v", env)
		}
	})
	t.Run("isError", func(t *testing.T) {
		_, url := demotest.StartTest(t, demoserver.Options{})
		wf := writeFile(t, "wf.yaml", workflowYAML(url, step{id: "boom", tool: "fail", idem: "pure", args: "{message: nope}"}))
		_, stderr, code := agentctl(t, "run", wf, "--db", filepath.Join(t.TempDir(), "a.db"), "--output", "json")
		if code != workflow.ExitFailed {
			t.Fatalf("exit %d, want %d\n%s", code, workflow.ExitFailed, stderr)
		}
	})
	t.Run("expired-at_most_once", func(t *testing.T) {
		var srv *demoserver.Server
		srv, url := startHooked(t, demoserver.Options{}, func(n int64) {
			if n == 2 {
				for ss := range srv.MCPServer().Sessions() {
					_ = ss.Close()
				}
			}
		})
		db := filepath.Join(t.TempDir(), "a.db")
		wf := writeFile(t, "wf.yaml", workflowYAML(url, step{id: "first", tool: "counter", idem: "at_most_once"}, step{id: "second", tool: "counter", idem: "at_most_once"}))
		_, stderr, code := agentctl(t, "run", wf, "--db", db)
		if code != workflow.ExitUncertain {
			t.Fatalf("exit %d, want %d\n%s", code, workflow.ExitUncertain, stderr)
		}
		if !regexp.MustCompile(`call [0-9a-f]{12} \(second\) → uncertain`).MatchString(stderr) {
			t.Errorf("stderr does not show the uncertain call:\n%s", stderr)
		}
		if n := srv.Calls("counter"); n != 1 {
			t.Fatalf("server ran counter %d times, want exactly 1", n)
		}
		_, log := onlyRun(t, db)
		if log[len(log)-1] != "run.finished uncertain" || count(log, "session.expired") != 1 {
			t.Fatalf("log:\n%s", numbered(log))
		}
	})
}

// assertCancelledNotice checks that the notifications/cancelled persisted in
// the run names the JSON-RPC id of its tools/call.
func assertCancelledNotice(tb testing.TB, path, runID string) {
	tb.Helper()
	evs := runEvents(tb, openDBAt(tb, path), runID)
	calls, cancels := frames(tb, evs, "tools/call"), frames(tb, evs, "notifications/cancelled")
	if len(cancels) != 1 || len(calls) == 0 {
		tb.Fatalf("%d tools/call frames, %d notifications/cancelled", len(calls), len(cancels))
	}
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
			Reason    string          `json:"reason"`
		} `json:"params"`
	}
	if err := json.Unmarshal(cancels[0].Body, &n); err != nil {
		tb.Fatal(err)
	}
	if string(n.Params.RequestID) != string(calls[0].ID) || n.Params.Reason == "" {
		tb.Fatalf("notifications/cancelled %s does not name tools/call id %s with a reason", cancels[0].Body, calls[0].ID)
	}
}
