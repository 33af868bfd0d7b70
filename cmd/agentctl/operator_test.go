package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// reportTool answers with a multi-line report (newlines, a CRLF, tabs and
// an escape sequence) as structured content.
func reportTool(report string) mcptest.ToolDef {
	return mcptest.ToolDef{Name: "report",
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("report"), StructuredContent: map[string]any{"report": report, "n": 2}}, nil
		}}
}

// TestCLI_MultilineOutputHuman: a multi-line output is printed on stdout
// as indented lines, each sanitised on its own (tabs kept, an escape
// neutralised), never with its newlines turned into U+FFFD; a one-line
// output stays on its name's line; json keeps the value as it is.
func TestCLI_MultilineOutputHuman(t *testing.T) {
	report := "# Research Report: raft\n\n## Research\tfindings\r\n- one\x1b[31m red\n"
	srv := mcptest.Start(t, mcptest.Options{}, reportTool(report))
	db := filepath.Join(t.TempDir(), "a.db")
	wf := testkit.Workflow{Name: "report", URL: srv.URL,
		Tasks: []testkit.Task{{ID: "write", Idempotency: "pure", Tool: "report"}},
		Outputs: []testkit.Output{{Name: "report", Value: "${{ tasks.write.output.report }}"},
			{Name: "n", Value: "${{ tasks.write.output.n }}"}}}.WriteFile(t)
	out, stderr, code := cli(t, "run", wf, "--db", db)
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, stderr)
	}
	want := "n: 2\nreport:\n  # Research Report: raft\n  \n  ## Research\tfindings\n  - one\uFFFD[31m red\n"
	if out != want {
		t.Fatalf("stdout =\n%q\nwant\n%q", out, want)
	}
	out, _, code = cli(t, "run", wf, "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, `"report": "# Research Report: raft\n\n## Research\tfindings\r\n- one\u001b[31m red\n"`) {
		t.Fatalf("json output changed the value: exit %d\n%s", code, out)
	}
}

// nextHints are the "next: COMMAND" lines of an output, in order.
func nextHints(out string) []string {
	var hs []string
	for _, l := range strings.Split(out, "\n") {
		if h, ok := strings.CutPrefix(l, "next: "); ok {
			hs = append(hs, h)
		}
	}
	return hs
}

// runPrinted runs every command an output printed, as printed (the
// database comes from AGENTCTL_DB, as for the user), and fails the test
// unless each exits 0; it returns the last one's stdout and stderr.
func runPrinted(t *testing.T, out string) (string, string) {
	t.Helper()
	hs := printedHints(out)
	if len(hs) == 0 {
		t.Fatalf("no command printed in:\n%s", out)
	}
	var o, e string
	for _, h := range hs {
		var code int
		o, e, code = runHint(t, h, "")
		if code != 0 {
			t.Fatalf("printed command %q: exit %d\n%s%s", h, code, o, e)
		}
	}
	return o, e
}

// TestCLI_InterruptedRun: a run whose process was SIGKILLed mid-call is
// shown interrupted (not running) by runs list and inspect, in human and
// json output, once no process holds it (SQLite: its lock is free;
// PostgreSQL: its lease expired); runs list --state interrupted finds it
// and --state running does not, while a live run is running and not
// interrupted. The human outputs name agentctl resume, which, run as
// printed, finishes the run.
func TestCLI_InterruptedRun(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		called := make(chan struct{})
		var once sync.Once
		tool := actTool()
		inner := tool.Handler
		hang := make(chan struct{})
		tool.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			once.Do(func() { close(called) })
			select {
			case <-hang:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return inner(ctx, c)
		}
		srv := mcptest.Start(t, mcptest.Options{}, tool)
		db := b.DSN(t)
		t.Setenv("AGENTCTL_DB", db) // the printed commands carry no --db
		run := subprocess(t, "run", actWorkflow(t, srv.URL, "idempotent"))
		var runOut bytes.Buffer
		run.Stdout, run.Stderr = &runOut, &runOut
		if err := run.Start(); err != nil {
			t.Fatal(err)
		}
		<-called
		runID := runIDs(t, db)[0]
		listed := func(state string) []string {
			t.Helper()
			out, stderr, code := cli(t, "runs", "list", "--state", state, "--output", "json")
			if code != 0 {
				t.Fatalf("runs list --state %s: exit %d %s", state, code, stderr)
			}
			var env struct {
				Data []struct {
					RunID string `json:"runId"`
					State string `json:"state"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(out), &env); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, r := range env.Data {
				if r.State != state {
					t.Fatalf("runs list --state %s lists %s %s", state, r.RunID, r.State)
				}
				ids = append(ids, r.RunID)
			}
			return ids
		}
		if got := listed("running"); len(got) != 1 || got[0] != runID {
			t.Fatalf("live run: runs list --state running = %v", got)
		}
		if got := listed("interrupted"); len(got) != 0 {
			t.Fatalf("live run listed interrupted: %v", got)
		}
		if out, _, _ := cli(t, "inspect", runID); !strings.Contains(out, "state     running\n") {
			t.Fatalf("live run: inspect:\n%s", out)
		}

		_ = run.Process.Kill()
		_ = run.Wait()
		awaitDeadOwners(t, db)
		if got := listed("interrupted"); len(got) != 1 || got[0] != runID {
			t.Fatalf("killed run: runs list --state interrupted = %v", got)
		}
		if got := listed("running"); len(got) != 0 {
			t.Fatalf("killed run listed running: %v", got)
		}
		out, stderr, code := cli(t, "runs", "list")
		if code != 0 || !regexp.MustCompile(`(?m)^\S+ +act-once +run +interrupted `).MatchString(out) ||
			!strings.Contains(stderr, "agentctl resume "+runID+"\n") {
			t.Fatalf("human runs list: exit %d\n%s%s", code, out, stderr)
		}
		out, stderr, code = cli(t, "inspect", runID[:14])
		if code != 0 || !strings.Contains(out, "state     interrupted") {
			t.Fatalf("inspect of the killed run: exit %d\n%s%s", code, out, stderr)
		}
		if h := nextHints(out); len(h) != 1 || h[0] != "agentctl resume "+runID {
			t.Fatalf("inspect hints %q, want the resume:\n%s", h, out)
		}
		jout, _, _ := cli(t, "inspect", runID, "--output", "json")
		if !strings.Contains(jout, `"state": "interrupted"`) {
			t.Fatalf("json inspect does not say interrupted:\n%.600s", jout)
		}
		close(hang)
		_, e := runPrinted(t, strings.Join(nextHints(out), "\n"))
		if !strings.Contains(e, "run "+runID+" succeeded") {
			t.Fatalf("the printed resume did not finish the run:\n%s", e)
		}
		if n := srv.Stats().Calls["act"]; n != 2 {
			t.Fatalf("server saw %d calls, want 2 (the killed one, the redispatch)", n)
		}
	})
}
