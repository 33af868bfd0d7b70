package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// blockingAct is actTool whose first call blocks until its request is
// cancelled (the client went away); it closes entered when that call
// arrives. Later calls answer at once. calls counts handler runs.
func blockingAct(entered chan struct{}, calls *atomic.Int32) mcptest.ToolDef {
	def := actTool()
	inner := def.Handler
	var once sync.Once
	def.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		if calls.Add(1) == 1 {
			once.Do(func() { close(entered) })
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return inner(ctx, c)
	}
	return def
}

// interruptRun starts `agentctl run wf` in a subprocess (database from
// AGENTCTL_DB), sends it SIGINT once the server holds its call, and
// returns its stderr after checking it exited 130.
func interruptRun(t *testing.T, wf string, entered chan struct{}) string {
	t.Helper()
	cmd := subprocess(t, "run", wf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("the call never reached the server; stderr:\n%s", stderr.String())
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("interrupted run: %v, want exit 130; stderr:\n%s", err, stderr.String())
	}
	return stderr.String()
}

// hintRE finds a printed command: "agentctl " after the start of a line,
// a space or an opening parenthesis, up to the end of the line.
var hintRE = regexp.MustCompile(`(^|[\s(])(agentctl [^\n]*)`)

// printedHints returns the commands an output suggests, in order, without the
// closing parenthesis of one printed in parentheses.
func printedHints(out string) []string {
	var hs []string
	for _, line := range strings.Split(out, "\n") {
		m := hintRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		h := strings.TrimSpace(m[2])
		if m[1] == "(" {
			h = strings.TrimSuffix(h, ")")
		}
		hs = append(hs, h)
	}
	return hs
}

// words splits a printed command as a shell would: spaces separate, double
// quotes group.
func words(t *testing.T, cmd string) []string {
	t.Helper()
	var out []string
	var cur strings.Builder
	quoted, have := false, false
	for _, r := range cmd {
		switch {
		case r == '"':
			quoted, have = !quoted, true
		case r == ' ' && !quoted:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if quoted {
		t.Fatalf("hint %q: unbalanced quote", cmd)
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// runHint runs a printed command in process, replacing only the documented
// placeholders (R.json: a result file; "...": a reason).
func runHint(t *testing.T, hint, resultFile string) (string, string, int) {
	t.Helper()
	w := words(t, hint)
	if w[0] != "agentctl" {
		t.Fatalf("hint %q does not start with agentctl", hint)
	}
	for i, x := range w {
		switch x {
		case "R.json":
			w[i] = resultFile
		case "…", "...":
			w[i] = "checked on the server by the test"
		}
	}
	return cli(t, w[1:]...)
}

// TestCLI_CtrlCHintsWork: SIGINT while a call is on the server ends the
// run cancelled (exit 130) with the call uncertain. Every command printed
// from then on is run as printed, for each verdict and each class that
// must not be sent twice blindly, until the run succeeds: applied uses
// the reconciled result (one call on the server), not-applied makes a new
// attempt (two). A replay of the interrupted run points at its source, not
// at resuming a replay.
func TestCLI_CtrlCHintsWork(t *testing.T) {
	for _, class := range []string{"at_most_once", "idempotent", "keyed"} {
		for _, verdict := range []string{"applied", "not-applied"} {
			t.Run(class+"/"+verdict, func(t *testing.T) {
				entered := make(chan struct{})
				var calls atomic.Int32
				srv := mcptest.Start(t, mcptest.Options{}, blockingAct(entered, &calls))
				dir := t.TempDir()
				db := filepath.Join(dir, "a.db")
				t.Setenv("AGENTCTL_DB", db) // hints carry no --db: they work as printed
				result := filepath.Join(dir, "result.json")
				if err := os.WriteFile(result, []byte(`{"done": true}`), 0o600); err != nil {
					t.Fatal(err)
				}
				stderr := interruptRun(t, actWorkflow(t, srv.URL, class), entered)
				queue := printedHints(stderr)
				ids := runIDs(t, db)
				if len(ids) != 1 {
					t.Fatalf("runs: %v", ids)
				}
				runID := ids[0]
				var sawReconcile, sawResume bool
				for _, h := range queue {
					sawReconcile = sawReconcile || strings.Contains(h, "effects reconcile") && strings.Contains(h, "--status "+verdict)
					sawResume = sawResume || h == "agentctl resume "+runID
				}
				if !sawReconcile || !sawResume {
					t.Fatalf("after SIGINT, hints %q lack reconcile --status %s or resume %s; stderr:\n%s", queue, verdict, runID, stderr)
				}

				if verdict == "applied" { // once per class: the replay of an interrupted run
					// It reproduces the uncertain call; its hints are the
					// source run's (which the walk below runs), never a
					// resume of the replay.
					_, rstderr, code := cli(t, "replay", runID)
					if code != 130 {
						t.Fatalf("replay of an interrupted run: exit %d, want 130 as its source\n%s", code, rstderr)
					}
					source := map[string]bool{}
					for _, h := range queue {
						source[h] = true
					}
					for _, h := range printedHints(rstderr) {
						if !source[h] && !strings.HasPrefix(h, "agentctl inspect replay-") {
							t.Fatalf("replay suggests %q, not a command on its source run; stderr:\n%s", h, rstderr)
						}
					}
					if !strings.Contains(rstderr, "agentctl resume "+runID) {
						t.Fatalf("replay does not point at its source run:\n%s", rstderr)
					}
				}

				ran := map[string]bool{}
				succeeded := false
				for len(queue) > 0 && !succeeded {
					// Commands that only read go first, so every one printed runs.
					next := 0
					for i, q := range queue {
						if strings.HasPrefix(q, "agentctl inspect ") || strings.HasPrefix(q, "agentctl effects list ") {
							next = i
							break
						}
					}
					h := queue[next]
					queue = append(queue[:next:next], queue[next+1:]...)
					if ran[h] {
						continue
					}
					if strings.Contains(h, "effects reconcile") && !strings.Contains(h, "--status "+verdict+" ") {
						continue // the other verdict: its own subtest walks it
					}
					ran[h] = true
					out, e, code := runHint(t, h, result)
					if code != 0 {
						t.Fatalf("hint %q: exit %d\nstdout:\n%s\nstderr:\n%s", h, code, out, e)
					}
					if strings.HasPrefix(h, "agentctl resume") {
						succeeded = strings.Contains(e, "run "+runID+" succeeded") && strings.Contains(out, `"done":true`)
						if !succeeded {
							t.Fatalf("hint %q did not end the run succeeded:\n%s\n%s", h, out, e)
						}
					}
					queue = append(queue, printedHints(out+e)...)
				}
				if !succeeded {
					t.Fatalf("hints ran out before the run succeeded: ran %v", ran)
				}
				t.Logf("after SIGINT:\n%s\nran: %v", stderr, ran)
				want := int32(1)
				if verdict == "not-applied" {
					want = 2
				}
				if n := calls.Load(); n != want {
					t.Fatalf("server ran the tool %d times, want %d", n, want)
				}
				if srv.Stats().Calls["act"] != int(want) {
					t.Fatalf("server saw %d tools/call, want %d", srv.Stats().Calls["act"], want)
				}
			})
		}
	}
}
