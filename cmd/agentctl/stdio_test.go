package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/demoserver/demotest"
)

// A test binary started with demotest.PeerEnv is a stdio MCP peer (before
// TestMain: a stdio server inherits nothing else from the test).
func init() {
	if mode := os.Getenv(demotest.PeerEnv); mode != "" {
		os.Exit(demotest.StdioPeer(mode))
	}
}

// stdioWorkflow writes a workflow whose server "local" is this binary as
// a stdio peer in mode (starts counted in startsFile), calling tool with
// idempotency; allow is the commandAllowlist ("" = the program itself).
func stdioWorkflow(t *testing.T, mode, startsFile, tool, idem, allow string) string {
	t.Helper()
	if allow == "" {
		allow = os.Args[0]
	}
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: stdio }
spec:
  policy:
    commandAllowlist: [%q]
  mcpServers:
    local:
      command: [%q]
      env: { %s: %q, %s: %q }
      timeoutSeconds: 20
      shutdownGraceSeconds: 1
  actions:
    act: { kind: mcp.call, idempotency: %s }
  tasks:
    - id: first
      uses: action:act
      with: { server: local, tool: %s, arguments: { message: "hello" } }
    - id: second
      uses: action:act
      with: { server: local, tool: echo, arguments: { message: "${{ tasks.first.output.message }}" } }
  outputs:
    message: "${{ tasks.second.output.message }}"
`, allow, os.Args[0], demotest.PeerEnv, mode, demotest.StartsEnv, startsFile, idem, tool)
	p := filepath.Join(t.TempDir(), "stdio.yaml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func countLines(t *testing.T, file, prefix string) int {
	t.Helper()
	b, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), prefix)
}

type stdioInspect struct {
	Data struct {
		Run              struct{ State string }
		ProtocolSessions []struct {
			Generation int
			URL        string
			Transport  string
		}
		ProtocolCalls []struct {
			Status     string
			Generation int
		}
		StreamEvents []struct {
			Type    string
			Payload json.RawMessage
		}
	}
}

func inspectStdio(t *testing.T, db, run string) stdioInspect {
	t.Helper()
	out, stderr, code := cli(t, "inspect", run, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect: %d %s", code, stderr)
	}
	var v stdioInspect
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// maxGeneration is the highest session generation (rows are per task).
func (v stdioInspect) maxGeneration() int {
	g := 0
	for _, s := range v.Data.ProtocolSessions {
		g = max(g, s.Generation)
	}
	return g
}

func (v stdioInspect) types(prefix string) []string {
	var out []string
	for _, e := range v.Data.StreamEvents {
		if strings.HasPrefix(e.Type, prefix) {
			out = append(out, e.Type)
		}
	}
	return out
}

// TestStdio_RunSharesOneProcessAndReplayStartsNone: two dependent tasks use
// one process (one generation), inspect says transport stdio and shows the
// process's start and end, and a replay starts no process.
func TestStdio_RunSharesOneProcessAndReplayStartsNone(t *testing.T) {
	dir := t.TempDir()
	db, starts := filepath.Join(dir, "a.db"), filepath.Join(dir, "starts")
	wf := stdioWorkflow(t, "demo", starts, "echo", "idempotent", "")
	out, stderr, code := cli(t, "run", wf, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
	}
	if !strings.Contains(out, `"hello"`) {
		t.Errorf("outputs: %s", out)
	}
	if n := countLines(t, starts, "start "); n != 1 {
		t.Fatalf("server started %d times, want 1 (shared by both tasks)", n)
	}
	v := inspectStdio(t, db, "last")
	if v.maxGeneration() != 1 || v.Data.ProtocolSessions[0].Transport != "stdio" || v.Data.ProtocolSessions[0].URL != "stdio:"+os.Args[0] {
		t.Errorf("protocolSessions = %+v", v.Data.ProtocolSessions)
	}
	if got := strings.Join(v.types("mcp.process"), ","); got != "mcp.process,mcp.process_exit" {
		t.Errorf("process events = %s", got)
	}
	// Each task's end is recorded once, and the process's end after the
	// last response it gave, with run.finished (not through the lane of
	// the task that started it, which would commit that task's end again).
	runID := runIDs(t, db)[0]
	if got, want := describe(t, db, runID), stdioTwoTaskLog(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	out, stderr, code = cli(t, "replay", "last", "--db", db)
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, stderr)
	}
	if n := countLines(t, starts, "start "); n != 1 {
		t.Errorf("replay started the server: %d starts, want 1", n)
	}
}

// stdioTwoTaskLog is the log of stdioWorkflow's two echo calls on one process.
func stdioTwoTaskLog() []string {
	call := []string{"call.prepared", "mcp.request out tools/call prepared->dispatched",
		"mcp.response in", "call.result dispatched->succeeded"}
	out := []string{"run.created", "task.started first", "mcp.process local",
		"mcp.request out initialize", "mcp.response in", "mcp.notification out notifications/initialized", "session.opened",
		"mcp.request out tools/list", "mcp.response in", "session.catalog"}
	out = append(append(out, call...), "task.finished first succeeded", "task.started second")
	return append(append(out, call...), "task.finished second succeeded", "mcp.process_exit local", "run.finished succeeded")
}

// TestStdio_PolicyRefusalStartsNothing: a program not in commandAllowlist
// is a policy refusal (exit 3) at file:line, and nothing starts.
func TestStdio_PolicyRefusalStartsNothing(t *testing.T) {
	dir := t.TempDir()
	db, starts := filepath.Join(dir, "a.db"), filepath.Join(dir, "starts")
	wf := stdioWorkflow(t, "demo", starts, "echo", "idempotent", "node")
	for _, args := range [][]string{{"run", wf, "--db", db}, {"check", wf}} {
		_, stderr, code := cli(t, args...)
		if code != 3 || !strings.Contains(stderr, "stdio.yaml:9:") || !strings.Contains(stderr, "commandAllowlist") {
			t.Errorf("%s: exit %d, want 3 naming stdio.yaml:9 and commandAllowlist\n%s", args[0], code, stderr)
		}
	}
	if n := countLines(t, starts, "start "); n != 0 {
		t.Errorf("server started %d times after a refusal", n)
	}
}

// TestStdio_DeathMidCall: the server dies in a call. An idempotent call is
// sent once more on a new process (generation 2, tools/list refreshed); an
// at_most_once call ends uncertain (exit 3) and no second process starts.
func TestStdio_DeathMidCall(t *testing.T) {
	for _, tc := range []struct {
		idem          string
		code, starts  int
		callStatus    string
		sessions      int // generations
		wantInMessage string
	}{
		{"idempotent", 0, 2, "succeeded", 2, ""},
		{"at_most_once", 3, 1, "uncertain", 1, "dying in the middle of a call"},
	} {
		t.Run(tc.idem, func(t *testing.T) {
			dir := t.TempDir()
			db, starts := filepath.Join(dir, "a.db"), filepath.Join(dir, "starts")
			wf := stdioWorkflow(t, "raw", starts, "die", tc.idem, "")
			_, stderr, code := cli(t, "run", wf, "--db", db)
			if code != tc.code || !strings.Contains(stderr, tc.wantInMessage) {
				t.Fatalf("run: exit %d, want %d\n%s", code, tc.code, stderr)
			}
			if n := countLines(t, starts, "start "); n != tc.starts {
				t.Errorf("%d processes started, want %d", n, tc.starts)
			}
			v := inspectStdio(t, db, "last")
			if v.maxGeneration() != tc.sessions || v.Data.ProtocolCalls[0].Status != tc.callStatus {
				t.Errorf("sessions %+v calls %+v", v.Data.ProtocolSessions, v.Data.ProtocolCalls)
			}
			var ex struct {
				ExitCode   int
				StderrTail string
			}
			for _, e := range v.Data.StreamEvents {
				if e.Type == "mcp.process_exit" {
					_ = json.Unmarshal(e.Payload, &ex)
					break
				}
			}
			if ex.ExitCode != 2 || !strings.Contains(ex.StderrTail, "dying in the middle") {
				t.Errorf("first process_exit = %+v, want exit 2 with the stderr tail", ex)
			}
		})
	}
}

// TestStdio_KillAgentctlKillsServer: kill -9 of agentctl mid-call leaves no
// server process (parent-death signal); resume then ends the call
// uncertain (at_most_once) without a second send.
func TestStdio_KillAgentctlKillsServer(t *testing.T) {
	dir := t.TempDir()
	db, starts := filepath.Join(dir, "a.db"), filepath.Join(dir, "starts")
	wf := stdioWorkflow(t, "raw", starts, "hang", "at_most_once", "")
	cmd := subprocess(t, "run", wf, "--db", db)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := waitForLine(t, starts, "hang ") // the call reached the server
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil { // the kernel delivers the parent-death signal asynchronously
		if time.Now().After(deadline) {
			t.Fatalf("server pid %d survived kill -9 of agentctl", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, stderr, code := cli(t, "resume", "last", "--db", db)
	if code != 3 || !strings.Contains(stderr, "uncertain") {
		t.Errorf("resume: exit %d, want 3 (uncertain)\n%s", code, stderr)
	}
	if n := countLines(t, starts, "hang "); n != 1 {
		t.Errorf("the at_most_once call reached a server %d times", n)
	}
}

// waitForLine waits until file has a line "prefix PID" and returns PID.
func waitForLine(t *testing.T, file, prefix string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if f, err := os.Open(file); err == nil {
			sc := bufio.NewScanner(f)
			for sc.Scan() {
				if rest, ok := strings.CutPrefix(sc.Text(), prefix); ok {
					f.Close()
					pid, err := strconv.Atoi(rest)
					if err != nil {
						t.Fatal(err)
					}
					return pid
				}
			}
			f.Close()
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %q line in %s", prefix, file)
	return 0
}

// TestStdio_AdHoc: mcp tools and mcp call take a stdio server after --
// (no allowlist: typing the command allows it), recorded as runs.
func TestStdio_AdHoc(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	peer := []string{"--", "env", demotest.PeerEnv + "=demo", os.Args[0]}
	out, stderr, code := cli(t, append([]string{"mcp", "tools", "--db", db, "--output", "json"}, peer...)...)
	if code != 0 || !strings.Contains(out, `"name": "echo"`) {
		t.Fatalf("mcp tools: exit %d\n%s\n%s", code, out, stderr)
	}
	out, stderr, code = cli(t, append([]string{"mcp", "call", "echo", "--db", db, "--args", `{"message":"hi"}`, "--output", "json"}, peer...)...)
	if code != 0 || !strings.Contains(out, `"hi"`) {
		t.Fatalf("mcp call: exit %d\n%s\n%s", code, out, stderr)
	}
	if v := inspectStdio(t, db, "last-adhoc"); len(v.Data.ProtocolSessions) != 1 || v.Data.ProtocolSessions[0].Transport != "stdio" {
		t.Errorf("ad hoc call sessions: %+v", v.Data.ProtocolSessions)
	}
	_, stderr, code = cli(t, "mcp", "tools", "--db", db, "--", "agentctl-no-such-program")
	if code == 0 || !strings.Contains(stderr, "agentctl-no-such-program") {
		t.Errorf("missing program: exit %d %s", code, stderr)
	}
	_, stderr, code = cli(t, "mcp", "tools", "--db", db, "extra", "--", "env")
	if code != 2 {
		t.Errorf("an argument before -- of mcp tools: exit %d, want 2: %s", code, stderr)
	}
}

// TestStdio_TaskStatusBetweenExchangesReplays: a stdio server's
// notifications/tasks/status that arrives while no exchange listens is
// recorded ahead of the next request (the first tasks/get); the run and a
// replay of it (and a replay of the replay) succeed from the log alone.
func TestStdio_TaskStatusBetweenExchangesReplays(t *testing.T) {
	dir := t.TempDir()
	db, starts := filepath.Join(dir, "a.db"), filepath.Join(dir, "starts")
	wf := stdioWorkflow(t, "raw", starts, "task", "at_most_once", "")
	if out, stderr, code := cli(t, "run", wf, "--db", db, "--output", "json"); code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
	}
	runID := runIDs(t, db)[0]
	log := describe(t, db, runID)
	i := slices.Index(log, "mcp.request out tasks/get")
	if i < 1 || log[i-1] != "mcp.notification in notifications/tasks/status" {
		t.Fatalf("the status notification is not recorded ahead of the first tasks/get:\n%s", strings.Join(log, "\n"))
	}
	out, stderr, code := cli(t, "replay", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("replay: exit %d\n%s\n%s", code, out, stderr)
	}
	if out, stderr, code := cli(t, "replay", jsonRunID(t, out), "--db", db); code != 0 {
		t.Fatalf("replay of the replay: exit %d\n%s\n%s", code, out, stderr)
	}
	if n := countLines(t, starts, "start "); n != 1 {
		t.Errorf("%d processes started, want 1 (replays start none)", n)
	}
}
