package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// follower runs `inspect RUN --follow` in-process and hands its stdout
// lines over a channel, closed when the command returns (its exit code on
// code).
type follower struct {
	lines chan string
	code  chan int
	err   bytes.Buffer
}

func startFollower(t *testing.T, args ...string) *follower {
	t.Helper()
	f := &follower{lines: make(chan string, 1024), code: make(chan int, 1)}
	pr, pw := io.Pipe()
	go func() {
		defer close(f.lines)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			f.lines <- sc.Text()
		}
	}()
	go func() {
		code := execute(context.Background(), args, pw, &f.err)
		_ = pw.Close()
		f.code <- code
	}()
	return f
}

// until reads lines until one contains want, and returns them all.
func (f *follower) until(t *testing.T, want string) []string {
	t.Helper()
	var got []string
	for l := range f.lines {
		got = append(got, l)
		if strings.Contains(l, want) {
			return got
		}
	}
	t.Fatalf("follower ended before a line with %q:\n%s\n%s", want, strings.Join(got, "\n"), f.err.String())
	return nil
}

// TestCLI_InspectFollow: --follow prints a run's events while the run is
// still going (its call held by the server's gate), in all three output
// modes, and ends with the run; what it printed is the whole log in order.
func TestCLI_InspectFollow(t *testing.T) {
	called := make(chan struct{})
	var once sync.Once
	gate := make(chan struct{})
	tool := actTool()
	tool.Handler = func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		once.Do(func() { close(called) })
		if err := c.Progress(1, 2, "first"); err != nil { // goes out at once
			return nil, err
		}
		if err := c.Progress(2, 2, "second"); err != nil { // waits for the gate
			return nil, err
		}
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Gate: gate})
	db := filepath.Join(t.TempDir(), "a.db")
	run := subprocess(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db)
	var runOut bytes.Buffer
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	<-called
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	modes := []string{"human", "jsonl", "json"}
	fs := map[string]*follower{}
	early := map[string][]string{}
	for _, m := range modes {
		fs[m] = startFollower(t, "inspect", ids[0][:12], "--follow", "--db", db, "--output", m)
	}
	// Each follower shows the first progress frame while the call is held.
	for _, m := range modes {
		want := `notifications/progress`
		if m == "human" {
			want = "progress 1/2 first"
		}
		early[m] = fs[m].until(t, want)
	}
	if n := srv.Stats().Calls["act"]; n != 1 {
		t.Fatalf("act called %d times before the gate opened", n)
	}
	close(gate)
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, runOut.String())
	}
	log := logOf(t, db, ids[0])
	for _, m := range modes {
		f := fs[m]
		rest := early[m]
		for l := range f.lines {
			rest = append(rest, l)
		}
		if code := <-f.code; code != 0 {
			t.Fatalf("%s follower exit %d: %s", m, code, f.err.String())
		}
		out := strings.Join(rest, "\n")
		switch m {
		case "human": // what run prints, not raw events (issue 33 item 6)
			for _, want := range []string{"run " + ids[0] + " started", "▶ only  local/act (idempotent)", "progress 1/2 first",
				"progress 2/2 second", ") dispatched → succeeded", "run " + ids[0] + " succeeded"} {
				if !strings.Contains(out, want) {
					t.Fatalf("human follow lacks %q:\n%s", want, out)
				}
			}
			if strings.Contains(out, "call.transition") {
				t.Fatalf("human follow prints raw events:\n%s", out)
			}
		default:
			dec := json.NewDecoder(strings.NewReader(out))
			for i, e := range log {
				var env struct {
					Kind string `json:"kind"`
					Data struct {
						Seq     int64           `json:"seq"`
						Hash    string          `json:"hash"`
						Payload json.RawMessage `json:"payload"`
					} `json:"data"`
				}
				if err := dec.Decode(&env); err != nil {
					t.Fatalf("%s: envelope %d: %v\n%s", m, i, err, out)
				}
				if env.Kind != "Event" || env.Data.Seq != e.Seq || env.Data.Hash != e.Hash || !strings.HasPrefix(string(env.Data.Payload), "{") {
					t.Fatalf("%s: envelope %d = %+v, want event #%d with an object payload", m, i, env, e.Seq)
				}
			}
			if dec.More() {
				t.Fatalf("%s: more output than the log", m)
			}
			if m == "jsonl" && len(rest) != len(log) {
				t.Fatalf("jsonl: %d lines for %d events", len(rest), len(log))
			}
		}
	}
}

// TestCLI_InspectFollowKilledRun: following a run whose process was
// killed prints its events and ends (exit 2, naming resume) once the run
// stops growing and no process holds it, instead of waiting forever.
func TestCLI_InspectFollowKilledRun(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	db := filepath.Join(t.TempDir(), "a.db")
	runID := crashRun(t, db, actWorkflow(t, srv.URL, "idempotent"), "call.prepared")
	out, stderr, code := cli(t, "inspect", runID, "--follow", "--db", db)
	if code != 2 || !strings.Contains(stderr, "no process is writing it") || !strings.Contains(stderr, "agentctl resume "+runID) {
		t.Fatalf("follow of a killed run: exit %d %s", code, stderr)
	}
	if !strings.Contains(out, "run "+runID+" started\n▶ only  local/act (idempotent)\n") {
		t.Fatalf("follow printed:\n%s", out)
	}
	out, _, code = cli(t, "inspect", runID, "--follow", "--db", db, "--output", "jsonl")
	if n := len(logOf(t, db, runID)); code != 2 || strings.Count(out, "\n") != n {
		t.Fatalf("jsonl follow: exit %d, %d lines for %d events:\n%s", code, strings.Count(out, "\n"), n, out)
	}
}
