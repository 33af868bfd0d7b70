package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
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
		if page := htmlReport(t, db, runID); !strings.Contains(page, `<span class="pill interrupted">interrupted</span>`) {
			t.Errorf("the HTML report does not say interrupted")
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

// TestCLI_EndingHints: every way a run ends prints the command that
// applies next, exactly, and that command run as printed carries the run
// on to success: a task that failed (resume --retry-failed), a server that
// was down (resume --retry-failed, once it is up), a Ctrl-C before
// anything was sent (resume), and an uncertain call (effects list).
func TestCLI_EndingHints(t *testing.T) {
	t.Run("failed task", func(t *testing.T) {
		var calls atomic.Int32
		flaky := actTool()
		inner := flaky.Handler
		flaky.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			if calls.Add(1) == 1 {
				return &mcptest.Result{Content: mcptest.Text("not yet"), IsError: true}, nil
			}
			return inner(ctx, c)
		}
		srv := mcptest.Start(t, mcptest.Options{}, flaky)
		t.Setenv("AGENTCTL_DB", filepath.Join(t.TempDir(), "a.db"))
		_, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"))
		runID := runIDIn(t, stderr)
		if code == 0 || !reflect.DeepEqual(nextHints(stderr), []string{"agentctl resume " + runID + " --retry-failed"}) {
			t.Fatalf("failed run: exit %d, hints %q:\n%s", code, nextHints(stderr), stderr)
		}
		_, e := runPrinted(t, strings.Join(nextHints(stderr), "\n"))
		if !strings.Contains(e, "run "+runID+" succeeded") || srv.Stats().Calls["act"] != 2 {
			t.Fatalf("the printed resume: %d calls\n%s", srv.Stats().Calls["act"], e)
		}
	})
	t.Run("server down", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close() // nothing listens: connect refused, nothing sent
		t.Setenv("AGENTCTL_DB", filepath.Join(t.TempDir(), "a.db"))
		_, stderr, code := cli(t, "run", actWorkflow(t, "http://"+addr+"/mcp", "at_most_once"))
		runID := runIDIn(t, stderr)
		if code == 0 || !reflect.DeepEqual(nextHints(stderr), []string{"agentctl resume " + runID + " --retry-failed"}) {
			t.Fatalf("run against a server that is down: exit %d, hints %q:\n%s", code, nextHints(stderr), stderr)
		}
		srv := mcptest.NewServer(mcptest.Options{}, actTool()) // the server comes up on the same address
		defer srv.Close()
		l, err = net.Listen("tcp", addr)
		if err != nil {
			t.Skipf("the address was taken in between: %v", err)
		}
		hs := &http.Server{Handler: srv}
		go func() { _ = hs.Serve(l) }()
		defer hs.Close()
		_, e := runPrinted(t, strings.Join(nextHints(stderr), "\n"))
		if !strings.Contains(e, "run "+runID+" succeeded") || srv.Stats().Calls["act"] != 1 {
			t.Fatalf("the printed resume: %d calls\n%s", srv.Stats().Calls["act"], e)
		}
	})
	t.Run("ctrl-c before sending", func(t *testing.T) {
		hang := make(chan struct{})
		defer close(hang)
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		srv.Inject(mcptest.Fault{RPCMethod: "initialize", Nth: 1, Hang: hang})
		// The first request (initialize) says it arrived, then hangs.
		arrived := make(chan struct{})
		var once sync.Once
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			once.Do(func() { close(arrived) })
			srv.ServeHTTP(w, r)
		}))
		defer front.Close()
		t.Setenv("AGENTCTL_DB", filepath.Join(t.TempDir(), "a.db"))
		cmd := subprocess(t, "run", actWorkflow(t, front.URL+"/mcp", "at_most_once"))
		stderrPipe, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		<-arrived // the session is being opened: no tool call was sent
		if err := cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderrPipe)
		for sc.Scan() {
			stderr.WriteString(sc.Text() + "\n")
		}
		_ = cmd.Wait()
		runID := runIDs(t, os.Getenv("AGENTCTL_DB"))[0]
		if cmd.ProcessState.ExitCode() != 130 || !reflect.DeepEqual(nextHints(stderr.String()), []string{"agentctl resume " + runID}) {
			t.Fatalf("Ctrl-C: exit %d, hints %q:\n%s", cmd.ProcessState.ExitCode(), nextHints(stderr.String()), stderr.String())
		}
		_, e := runPrinted(t, strings.Join(nextHints(stderr.String()), "\n"))
		if !strings.Contains(e, "run "+runID+" succeeded") || srv.Stats().Calls["act"] != 1 {
			t.Fatalf("the printed resume: %d calls\n%s", srv.Stats().Calls["act"], e)
		}
	})
	t.Run("uncertain", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
		t.Setenv("AGENTCTL_DB", filepath.Join(t.TempDir(), "a.db"))
		_, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "unknown"))
		runID := runIDIn(t, stderr)
		if code != 3 || !reflect.DeepEqual(nextHints(stderr), []string{"agentctl effects list " + runID}) {
			t.Fatalf("uncertain run: exit %d, hints %q:\n%s", code, nextHints(stderr), stderr)
		}
		out, _ := runPrinted(t, strings.Join(nextHints(stderr), "\n"))
		if !strings.Contains(out, "uncertain") {
			t.Fatalf("effects list as printed:\n%s", out)
		}
	})
}

// TestCLI_AdhocErrorsNameFlags: an ad hoc command's errors name the
// argument or flag at fault and the flag that fixes it, never the file
// and keys of the workflow built from the flags (which the user never
// wrote); --timeout takes a duration or plain seconds; mcp tools' table
// shows each tool's execution.taskSupport.
func TestCLI_AdhocErrorsNameFlags(t *testing.T) {
	task := actTool()
	task.Name, task.Execution = "slow_job", json.RawMessage(`{"taskSupport":"optional"}`)
	srv := mcptest.Start(t, mcptest.Options{}, actTool(), task)
	db := filepath.Join(t.TempDir(), "a.db")
	for _, args := range [][]string{{"mcp", "call", srv.URL, "act"}, {"mcp", "tools", srv.URL}} {
		_, stderr, code := cli(t, append(args, "--db", db)...)
		want := "agentctl: URL " + srv.URL + `: host "127.0.0.1" is a loopback address; pass --allow-private to allow it`
		if code != 3 || !strings.HasPrefix(stderr, want) || strings.Contains(stderr, "adhoc.json") || strings.Contains(stderr, "spec.") {
			t.Errorf("%v without --allow-private: exit %d\n%s\nwant it to start %q", args, code, stderr, want)
		}
	}
	for _, tc := range []struct {
		timeout string
		code    int
	}{{"5", 0}, {"5s", 0}, {"1m", 0}, {"0.5", 2}, {"abc", 2}} {
		_, stderr, code := cli(t, "mcp", "call", srv.URL, "act", "--allow-private", "--timeout", tc.timeout, "--db", db)
		if code != tc.code || code != 0 && !strings.Contains(stderr, "--timeout") {
			t.Errorf("--timeout %s: exit %d, want %d: %s", tc.timeout, code, tc.code, stderr)
		}
	}
	out, stderr, code := cli(t, "mcp", "tools", srv.URL, "--allow-private", "--db", db)
	if code != 0 || !regexp.MustCompile(`(?m)^NAME +TITLE +INPUT +OUTPUT +TASKS +HINTS`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^slow_job +.* optional +- `).MatchString(out) || !regexp.MustCompile(`(?m)^act +.* - +- `).MatchString(out) {
		t.Fatalf("mcp tools: exit %d %s\n%s", code, stderr, out)
	}
}

// TestCLI_HelpDrift: runs list's help filters by a workflow name that the
// README's example has (lookup-demo); README's fleet recipe writes into a
// database of its own, not the tests' agentctl_test; audit export has one
// output flag (-o/--out), not two.
func TestCLI_HelpDrift(t *testing.T) {
	out, _, _ := cli(t, "runs", "list", "--help")
	m := regexp.MustCompile(`--workflow (\S+)`).FindStringSubmatch(out)
	src, err := os.ReadFile("../../examples/lookup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if m == nil || !strings.Contains(string(src), "metadata: { name: "+m[1]+" }") && !strings.Contains(string(src), "name: "+m[1]+"\n") {
		t.Fatalf("runs list --help filters by workflow %v, not examples/lookup.yaml's name:\n%s", m, out)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	fleet := regexp.MustCompile(`export AGENTCTL_DB=\$\(bash \.ci/postgres ?([a-z_]*)\)`).FindSubmatch(readme)
	if fleet == nil || len(fleet[1]) == 0 || string(fleet[1]) == "agentctl_test" {
		t.Fatalf("README's fleet recipe does not give its own database to .ci/postgres: %q", fleet)
	}
	out, _, _ = cli(t, "audit", "export", "--help")
	if !strings.Contains(out, "-o, --out") || strings.Contains(out, "--file") {
		t.Fatalf("audit export flags:\n%s", out)
	}
	if _, stderr, code := cli(t, "audit", "export", "last", "--file", "x.jsonl"); code != 2 || !strings.Contains(stderr, "unknown flag: --file") {
		t.Fatalf("audit export --file: exit %d %s", code, stderr)
	}
}

// TestCLI_ReconcileResultFileForms: --result-file takes the call's result
// as the task's output would have been: the structuredContent object of a
// tool with an outputSchema (validated against it), or, for a text-only
// tool (no outputSchema), its content array; resume then uses it as the
// task's output, and the tool is not called again.
func TestCLI_ReconcileResultFileForms(t *testing.T) {
	note := mcptest.ToolDef{Name: "note", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return &mcptest.Result{Content: mcptest.Text("noted")}, nil
	}}
	for _, tc := range []struct {
		name, tool, result, want string
	}{
		{"structuredContent", "act", `{"done": true}`, `"outputs":{"result":{"done":true}}`},
		{"content array", "note", `[{"type": "text", "text": "order 17 created by hand"}]`, `"outputs":{"result":[{"text":"order17createdbyhand","type":"text"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, actTool(), note)
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
			db := filepath.Join(t.TempDir(), "a.db")
			wf := testkit.Workflow{Name: "reconcile", URL: srv.URL,
				Tasks:   []testkit.Task{{ID: "only", Idempotency: "unknown", Tool: tc.tool}},
				Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
			_, stderr, code := cli(t, "run", wf, "--db", db)
			if code != 3 {
				t.Fatalf("run: exit %d, want 3 (uncertain): %s", code, stderr)
			}
			effects := listEffects(t, db, "last")
			result := writeFile(t, tc.result)
			if _, stderr, code := cli(t, "effects", "reconcile", effects[0]["effectId"].(string), "--status", "applied", "--reason", "checked by hand", "--result-file", result, "--db", db); code != 0 {
				t.Fatalf("reconcile with %s: exit %d %s", tc.result, code, stderr)
			}
			out, stderr, code := cli(t, "resume", "last", "--db", db, "--output", "json")
			if code != 0 || !strings.Contains(strings.Join(strings.Fields(out), ""), tc.want) {
				t.Fatalf("resume: exit %d %s\n%s", code, stderr, out)
			}
			if n := srv.Stats().Calls[tc.tool]; n != 1 {
				t.Fatalf("server saw %d calls of %s, want 1 (the uncertain one)", n, tc.tool)
			}
		})
	}
}
