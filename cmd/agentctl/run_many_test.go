package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// failOn makes qt's tool report a tool error (isError) for q == bad.
func (qt *qTool) failOn(bad string) mcptest.ToolDef {
	d := qt.def()
	ok := d.Handler
	d.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		res, err := ok(ctx, c)
		var a struct{ Q string }
		_ = json.Unmarshal(c.Arguments, &a)
		if a.Q == bad {
			return &mcptest.Result{Content: mcptest.Text("no such thing"), IsError: true}, nil
		}
		return res, err
	}
	return d
}

// borrowed is a run's log as `agentctl run` records it, less the frames
// of the session handshake: what a run that borrowed its session from
// another run of the process records instead (session.opened with
// borrowedFrom and its copy of session.catalog stay).
func borrowed(single []string) []string {
	var out []string
	for i, d := range single {
		if strings.HasPrefix(d, "mcp.request out initialize") || strings.HasPrefix(d, "mcp.request out tools/list") ||
			strings.HasPrefix(d, "mcp.notification out notifications/initialized") ||
			d == "mcp.response in" && i > 0 && (strings.HasPrefix(single[i-1], "mcp.request out initialize") || strings.HasPrefix(single[i-1], "mcp.request out tools/list")) {
			continue
		}
		out = append(out, d)
	}
	return out
}

// TestCLI_RunInputs (issue 34): run --inputs executes one run per line in
// one process, directly (no queue), K at once: every run succeeds in input
// order, records what a single `agentctl run` records (the run that opened
// the session exactly; the others the same less the handshake they
// borrowed), the server sees exactly one tools/call per task of each run
// and at most K initialize (one per session the runs opened).
func TestCLI_RunInputs(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, k := range []int{1, 3} {
			t.Run(fmt.Sprintf("in-flight-%d", k), func(t *testing.T) {
				tool := &qTool{}
				srv := mcptest.Start(t, mcptest.Options{}, tool.def())
				db := b.DSN(t)
				wf := inputsWorkflow(t, srv.URL)
				out, stderr, code := cli(t, "run", wf, "--input", "q=z", "--db", db, "--output", "json")
				if code != 0 {
					t.Fatalf("single run: exit %d: %s", code, stderr)
				}
				single := describe(t, db, jsonRunID(t, out))
				before := srv.Stats()
				const n = 6
				lines := []string{`{"q": "q0"}`, ``}
				for i := 1; i < n; i++ {
					lines = append(lines, fmt.Sprintf(`{"q": "q%d"}`, i))
				}
				out, stderr, code = cli(t, "run", wf, "--inputs", writeLines(t, lines...), "--runs-in-flight", fmt.Sprint(k), "--db", db, "--output", "json")
				if code != 0 {
					t.Fatalf("run --inputs: exit %d: %s\n%s", code, stderr, out)
				}
				res := decodeBatch(t, out)
				if len(res.Runs) != n || res.Stopped {
					t.Fatalf("%d runs (stopped %v), want %d:\n%s", len(res.Runs), res.Stopped, n, out)
				}
				st := srv.Stats()
				if calls := st.Calls["look"] - before.Calls["look"]; calls != 2*n {
					t.Fatalf("the server saw %d tools/call, want %d", calls, 2*n)
				}
				inits := st.Initialize - before.Initialize
				if inits < 1 || inits > k {
					t.Fatalf("%d initialize for %d runs %d at once, want 1 to %d (sessions shared)", inits, n, k, k)
				}
				opened := 0
				for i, r := range res.Runs {
					if want := i + 1; i > 0 {
						want++ // the blank line
						if r.Line != want {
							t.Errorf("run %d: line %d, want %d", i, r.Line, want)
						}
					}
					if r.State != "succeeded" || r.ExitCode != 0 {
						t.Errorf("run %s: %s exit %d", r.RunID, r.State, r.ExitCode)
					}
					got := describe(t, db, r.RunID)
					switch {
					case slices.Equal(got, single):
						opened++
					case !slices.Equal(got, borrowed(single)):
						t.Errorf("run %s recorded:\n%s\nwant what agentctl run records:\n%s", r.RunID, strings.Join(got, "\n"), strings.Join(single, "\n"))
					}
				}
				if opened != inits {
					t.Errorf("%d runs opened a session, the server saw %d initialize", opened, inits)
				}
				if k == 1 && opened != 1 {
					t.Errorf("one at a time: %d runs opened a session, want the first alone", opened)
				}
				want := []string{"z", "z"}
				for i := range n {
					want = append(want, fmt.Sprintf("q%d", i), fmt.Sprintf("q%d", i))
				}
				slices.Sort(want)
				if got := tool.got(); !slices.Equal(got, want) {
					t.Fatalf("the server got q = %v, want %v", got, want)
				}
				if got := len(runStates(t, db)); got != n+1 {
					t.Fatalf("%d runs recorded, want %d", got, n+1)
				}
			})
		}
	})
}

// TestCLI_RunInputsBadLine: a line that does not parse or check stops
// starting runs with exit 2 naming FILE:LINE and the field at fault; the
// run of the line before it is recorded and listed, nothing of the bad
// line or after it runs.
func TestCLI_RunInputsBadLine(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		tool := &qTool{}
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		wf := inputsWorkflow(t, srv.URL)
		for _, tc := range []struct{ name, bad, want string }{
			{"not-json", `q=b`, ":2: expected a JSON object"},
			{"wrong-type", `{"q": 7}`, ":2: "},
			{"unknown-input", `{"q": "b", "nope": 1}`, ":2: "},
		} {
			t.Run(tc.name, func(t *testing.T) {
				db := b.DSN(t)
				file := writeLines(t, `{"q": "a"}`, tc.bad, `{"q": "c"}`)
				calls := srv.Stats().Calls["look"]
				out, stderr, code := cli(t, "run", wf, "--inputs", file, "--db", db, "--output", "json")
				if code != 2 || !strings.Contains(stderr, file+tc.want) {
					t.Fatalf("run --inputs exit %d, want 2 naming %s%s: %s", code, file, tc.want, stderr)
				}
				if tc.name == "unknown-input" && !strings.Contains(stderr, "nope") {
					t.Fatalf("the error does not name the field at fault: %s", stderr)
				}
				res := decodeBatch(t, out)
				if len(res.Runs) != 1 || res.Runs[0].Line != 1 || res.Runs[0].State != "succeeded" || !res.Stopped {
					t.Fatalf("want line 1's run alone, succeeded, and stopped:\n%s", out)
				}
				if st := runStates(t, db); len(st) != 1 || st[res.Runs[0].RunID] != "succeeded" {
					t.Fatalf("runs recorded: %v, want line 1's alone", st)
				}
				if got := srv.Stats().Calls["look"] - calls; got != 2 {
					t.Fatalf("the server saw %d tools/call, want line 1's 2", got)
				}
			})
		}
	})
}

// TestCLI_RunInputsFlags: --inputs does not combine with --input or
// --inputs-file, --runs-in-flight needs --inputs and 1 or more (exit 2,
// nothing recorded).
func TestCLI_RunInputsFlags(t *testing.T) {
	wf := inputsWorkflow(t, "http://127.0.0.1:9/mcp")
	db := filepath.Join(t.TempDir(), "a.db")
	file := writeLines(t, `{"q": "a"}`)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--inputs", file, "--input", "q=a"}, "does not combine with --input"},
		{[]string{"--inputs", file, "--inputs-file", file}, "does not combine with --input"},
		{[]string{"--input", "q=a", "--runs-in-flight", "2"}, "--runs-in-flight applies to --inputs"},
		{[]string{"--inputs", file, "--runs-in-flight", "0"}, "--runs-in-flight 0: want 1 or more"},
	} {
		if _, stderr, code := cli(t, append([]string{"run", wf, "--db", db}, tc.args...)...); code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("run %v: exit %d, want 2 saying %q: %s", tc.args, code, tc.want, stderr)
		}
	}
}

// TestCLI_RunInputsFailedRun: a run whose tool fails (isError) ends failed
// (exit 4) and the command exits 4 naming it; the runs of the other lines,
// after it included, still run and succeed. Human output prints one line
// per run as it ends.
func TestCLI_RunInputsFailedRun(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		tool := &qTool{}
		srv := mcptest.Start(t, mcptest.Options{}, tool.failOn("bad"))
		db := b.DSN(t)
		wf := inputsWorkflow(t, srv.URL)
		file := writeLines(t, `{"q": "a"}`, `{"q": "bad"}`, `{"q": "c"}`, `{"q": "d"}`)
		out, stderr, code := cli(t, "run", wf, "--inputs", file, "--runs-in-flight", "2", "--db", db, "--output", "json")
		if code != 4 || !strings.Contains(stderr, "1 of 4 runs did not succeed") || !strings.Contains(stderr, `"class":"failed"`) {
			t.Fatalf("exit %d, want 4 naming the failed run: %s", code, stderr)
		}
		res := decodeBatch(t, out)
		if len(res.Runs) != 4 || res.Stopped {
			t.Fatalf("want 4 runs listed:\n%s", out)
		}
		for i, r := range res.Runs {
			want, wantCode := "succeeded", 0
			if i == 1 {
				want, wantCode = "failed", 4
			}
			if r.Line != i+1 || r.State != want || r.ExitCode != wantCode {
				t.Errorf("line %d: run %s %s exit %d, want line %d %s exit %d", r.Line, r.RunID, r.State, r.ExitCode, i+1, want, wantCode)
			}
		}
		if got, want := len(tool.got()), 2*3+1; got != want {
			t.Fatalf("the server got %d calls, want %d (the failed run's second task skipped)", got, want)
		}

		out, stderr, code = cli(t, "run", wf, "--inputs", writeLines(t, `{"q": "a"}`, `{"q": "bad"}`), "--db", db)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != 4 || len(lines) != 2 || !strings.HasSuffix(lines[0], " succeeded (exit 0)") || !strings.Contains(lines[1], " failed (exit 4): ") {
			t.Fatalf("human: exit %d, want 4 and a line per run:\n%s\n%s", code, out, stderr)
		}
		if !strings.Contains(stderr, "runs: 2 ended, 1 succeeded, 1 did not") || !strings.Contains(stderr, "next: agentctl resume ") {
			t.Fatalf("human: stderr lacks the summary or the next command:\n%s", stderr)
		}
	})
}

// batch is the data of a RunsResult envelope.
type batch struct {
	Runs []struct {
		Line     int    `json:"line"`
		RunID    string `json:"runId"`
		State    string `json:"state"`
		ExitCode int    `json:"exitCode"`
	} `json:"runs"`
	Stopped bool `json:"stopped"`
}

func decodeBatch(t *testing.T, out string) batch {
	t.Helper()
	var env struct {
		Kind string `json:"kind"`
		Data batch  `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || env.Kind != "RunsResult" {
		t.Fatalf("not a RunsResult envelope (%v):\n%s", err, out)
	}
	return env.Data
}

// TestCLI_RunInputsInterrupted: Ctrl-C (the command's context cancelled)
// while K runs are in their first call starts no more runs; the K in
// flight end as an interrupted `agentctl run` does (recorded, resumable),
// and the command exits with the worst of them, listing the K runs as
// stopped. The server saw K tools/call and nothing of the later lines.
func TestCLI_RunInputsInterrupted(t *testing.T) {
	const k = 2
	entered, release := make(chan struct{}, k), make(chan struct{})
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "look", Handler: func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
		entered <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return &mcptest.Result{Content: mcptest.Text("looked"), StructuredContent: map[string]any{"match": true}}, nil
	}})
	defer close(release)
	db := filepath.Join(t.TempDir(), "a.db")
	wf := inputsWorkflow(t, srv.URL)
	file := writeLines(t, `{"q": "a"}`, `{"q": "b"}`, `{"q": "c"}`, `{"q": "d"}`)
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb strings.Builder
	done := make(chan int)
	go func() {
		done <- execute(ctx, []string{"run", wf, "--inputs", file, "--runs-in-flight", fmt.Sprint(k), "--db", db, "--output", "json"}, &out, &errb)
	}()
	for range k {
		<-entered
	}
	cancel()
	code := <-done
	res := decodeBatch(t, out.String())
	if len(res.Runs) != k || !res.Stopped {
		t.Fatalf("want %d runs listed and stopped:\n%s", k, out.String())
	}
	codes := []int{}
	for _, r := range res.Runs {
		codes = append(codes, r.ExitCode)
		if r.State != "cancelled" || r.ExitCode != workflow.ExitCancelled {
			t.Errorf("run %s of line %d: %s exit %d, want cancelled 130 as an interrupted run", r.RunID, r.Line, r.State, r.ExitCode)
		}
	}
	if want := workflow.WorstExit(codes...); code != want {
		t.Fatalf("exit %d, want the worst run's %d: %s", code, want, errb.String())
	}
	if got := srv.Stats().Calls["look"]; got != k {
		t.Fatalf("the server saw %d tools/call, want %d", got, k)
	}
	if got := len(runStates(t, db)); got != k {
		t.Fatalf("%d runs recorded, want %d", got, k)
	}
}

// TestCLI_RunInputsCommits: run --inputs sets no per-event observer, so
// each run's run.created rides its first commit: N runs one at a time
// cost exactly N times the commits of one `agentctl run --output json`
// (no observer either), and one commit fewer per run than a run shown
// with progress (--output human). Not parallel: it wraps testHooks.
func TestCLI_RunInputsCommits(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, (&qTool{}).def())
	wf := inputsWorkflow(t, srv.URL)
	commits := func(args ...string) uint64 {
		t.Helper()
		var db *events.DB
		prev := testHooks.runner
		testHooks.runner = func(r *workflow.Runner) {
			db = r.DB
			if prev != nil {
				prev(r)
			}
		}
		defer func() { testHooks.runner = prev }()
		if _, stderr, code := cli(t, append(args, "--db", filepath.Join(t.TempDir(), "a.db"))...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		return uint64(db.CommitStats().Commits)
	}
	single := commits("run", wf, "--input", "q=a", "--output", "json")
	shown := commits("run", wf, "--input", "q=a")
	const n = 4
	many := commits("run", wf, "--inputs", writeLines(t, `{"q": "a"}`, `{"q": "b"}`, `{"q": "c"}`, `{"q": "d"}`), "--output", "json")
	if many != n*single || shown != single+1 {
		t.Fatalf("commits: %d runs with --inputs %d, want %d × %d; one run shown with progress %d, want %d", n, many, n, single, shown, single+1)
	}
}
