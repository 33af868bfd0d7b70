package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/internal/tspeer"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
)

// Stdio: the pinned reference servers (interop/) run as child processes
// of agentctl, node by absolute path (nothing is downloaded).

// stdioWF is a workflow whose remote "peer" is the stdio server command.
func stdioWF(command []string, serverKeys, policyKeys []string, steps ...step) testkit.Workflow {
	tasks := make([]testkit.Task, len(steps))
	for i, s := range steps {
		tasks[i] = testkit.Task{ID: s.id, Idempotency: s.idem, Tool: s.tool, Arguments: s.args}
	}
	return testkit.Workflow{Name: "e2e-stdio", Server: "peer", Command: command, ServerKeys: append([]string{"shutdownGraceSeconds: 2"}, serverKeys...),
		PolicyKeys: policyKeys, Tasks: tasks, Outputs: testkit.TaskOutputs(tasks)}
}

// processFrames decodes the run's mcp.process and mcp.process_exit bodies.
func processFrames(tb testing.TB, evs []events.Event) ([]transport.ProcessInfo, []transport.ProcessExit) {
	tb.Helper()
	var infos []transport.ProcessInfo
	var exits []transport.ProcessExit
	for _, f := range decodeAll[vocab.Frame](tb, evs, vocab.FramePrefix+"process") {
		var p transport.ProcessInfo
		if err := json.Unmarshal(f.Body, &p); err != nil {
			tb.Fatal(err)
		}
		infos = append(infos, p)
	}
	for _, f := range decodeAll[vocab.Frame](tb, evs, vocab.FramePrefix+"process_exit") {
		var p transport.ProcessExit
		if err := json.Unmarshal(f.Body, &p); err != nil {
			tb.Fatal(err)
		}
		exits = append(exits, p)
	}
	return infos, exits
}

// assertCleanEnd checks that the run started exactly one server process,
// which ended on its own once its stdin closed (exit 0), its end recorded
// last before run.finished, and that it is gone.
func assertCleanEnd(tb testing.TB, evs []events.Event) {
	tb.Helper()
	assertEnd(tb, evs, transport.ProcessExit{ExitCode: 0, Stopped: "exit"})
}

// assertEnd is assertCleanEnd for a process that ended as want says
// (exit code, signal, stoppedBy).
func assertEnd(tb testing.TB, evs []events.Event, want transport.ProcessExit) {
	tb.Helper()
	infos, exits := processFrames(tb, evs)
	if len(infos) != 1 || len(exits) != 1 || exits[0].PID != infos[0].PID || exits[0].ExitCode != want.ExitCode ||
		exits[0].Signal != want.Signal || exits[0].Stopped != want.Stopped {
		tb.Fatalf("process frames %+v / %+v, want one process ending %+v", infos, exits, want)
	}
	if n := len(evs); n < 2 || evs[n-2].Type != vocab.FramePrefix+"process_exit" || evs[n-1].Type != vocab.TypeRunFinished {
		tb.Fatalf("the process's end is not recorded last before run.finished")
	}
	assertGone(tb, infos)
}

// assertGone fails unless every recorded server process is dead (a pid
// now held by another process, with another start time, counts as dead).
func assertGone(tb testing.TB, infos []transport.ProcessInfo) {
	tb.Helper()
	for _, p := range infos {
		if alive(p.PID, p.StartTime) {
			tb.Fatalf("server process %d (%s) is still alive", p.PID, p.Program)
		}
	}
}

// alive reports whether the process pid started at start is running (not a zombie).
func alive(pid int, start uint64) bool {
	st, err := transport.ProcessStartTime(pid)
	if err != nil || st != start {
		return false
	}
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// stdioSession is the log of starting a stdio server and opening its
// session, whose tools/list takes one page.
func stdioSession() []string {
	return append([]string{"mcp.process local"}, openSession(1)...)
}

// TestStdio_Filesystem: the reference filesystem server (a stdio child
// process) writes a file in one task and reads it back in a task that
// needs it, on one process; the file is on disk.
func TestStdio_Filesystem(t *testing.T) {
	dir := t.TempDir()
	wf := stdioWF(tspeer.StdioCommand(t, tspeer.Filesystem, dir), nil, nil,
		step{id: "write", tool: "write_file", idem: "idempotent", args: `{path: note.txt, content: "written by agentctl"}`},
		step{id: "read", tool: "read_text_file", idem: "pure", args: `{path: note.txt}`})
	wf.Tasks[1].Keys = []string{"needs: [write]"}
	res, db := runWorkflow(t, context.Background(), wf.YAML(), nil)
	if res.Err != nil {
		t.Fatalf("run: %v", res.Err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "note.txt")); err != nil || string(b) != "written by agentctl" {
		t.Fatalf("note.txt on disk: %q, %v", b, err)
	}
	if got := outputString(t, res.Outputs["read"]); got != `{"content":"written by agentctl"}` {
		t.Fatalf("read output = %s", got)
	}
	if got := outputString(t, res.Outputs["write"]); got != `{"content":"Successfully wrote to note.txt"}` {
		t.Fatalf("write output = %s", got)
	}
	assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started write"), stdioSession(), succeededCall(0),
		lines("task.finished write succeeded", "task.started read"), succeededCall(0),
		lines("task.finished read succeeded", "mcp.process_exit local", "run.finished succeeded")))
	evs := runEvents(t, db, res.RunID)
	assertCleanEnd(t, evs)
	opened := decodeAll[vocab.SessionOpened](t, evs, vocab.TypeSessionOpened)
	if len(opened) != 1 || !strings.Contains(string(opened[0].ServerInfo), `"secure-filesystem-server"`) || !strings.HasPrefix(opened[0].URL, "stdio:/") {
		t.Fatalf("session.opened = %+v", opened)
	}
	verifyChain(t, db, res.RunID)
}

// everything runs the reference "everything" server in stdio mode.
func everything(tb testing.TB) []string {
	return tspeer.StdioCommand(tb, tspeer.Everything, "stdio")
}

// TestStdio_TSEverything runs the reference everything server as a stdio
// child process: echo, progress in order, and a task-required tool called
// as an MCP task.
func TestStdio_TSEverything(t *testing.T) {
	ctx := context.Background()
	t.Run("echo", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, stdioWF(everything(t), nil, nil, step{id: "say", tool: "echo", idem: "pure", args: "{message: hello}"}).YAML(), nil)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if got := outputString(t, res.Outputs["say"]); got != `[{"text":"Echo: hello","type":"text"}]` {
			t.Fatalf("output = %s", got)
		}
		evs := runEvents(t, db, res.RunID)
		if n := len(frames(t, evs, "tools/call")); n != 1 {
			t.Fatalf("%d tools/call frames", n)
		}
		assertCleanEnd(t, evs)
		verifyChain(t, db, res.RunID)
	})

	t.Run("trigger-long-running-operation", func(t *testing.T) {
		var live []string
		var d projector.Describer
		observe := func(e events.Event) { live = append(live, d.Describe(e)) }
		res, db := runWorkflow(t, ctx, stdioWF(everything(t), nil, nil,
			step{id: "op", tool: "trigger-long-running-operation", idem: "pure", args: "{duration: 0.3, steps: 3}"}).YAML(), observe)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		evs := runEvents(t, db, res.RunID)
		assertProgress(t, evs, 3, "")
		// The call's part of the log, exactly: three progress notifications
		// persisted in order, each before the next line was read.
		log := describe(t, db, res.RunID)
		i := slices.Index(log, "mcp.request out tools/call prepared->dispatched")
		if i < 0 || i+6 > len(log) || !slices.Equal(log[i:i+6], succeededCall(3)[1:]) {
			t.Fatalf("log:\n%s", numbered(log))
		}
		if strings.Join(live, "\n") != strings.Join(log, "\n") {
			t.Fatalf("observer saw:\n%s", numbered(live))
		}
		if got := outputString(t, res.Outputs["op"]); got != `[{"text":"Long running operation completed. Duration: 0.3 seconds, Steps: 3.","type":"text"}]` {
			t.Fatalf("output = %s", got)
		}
		assertCleanEnd(t, evs)
	})

	// A task-required tool is called as an MCP task over stdio: one
	// tools/call, tasks/get until completed, then tasks/result.
	t.Run("simulate-research-query", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, stdioWF(everything(t), nil, nil,
			step{id: "research", tool: "simulate-research-query", idem: "at_most_once", args: "{topic: stdio}"}).YAML(), nil)
		if res.Err != nil || res.State != workflow.StateSucceeded {
			t.Fatalf("run: %s %v", res.State, res.Err)
		}
		evs := runEvents(t, db, res.RunID)
		if n := len(frames(t, evs, "tools/call")); n != 1 {
			t.Fatalf("%d tools/call frames, want 1", n)
		}
		if n := len(frames(t, evs, "tasks/result")); n != 1 {
			t.Fatalf("%d tasks/result frames, want 1", n)
		}
		doc, err := projector.Inspect(ctx, db, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		task := doc.ProtocolCalls[0].Task
		if task == nil || task.TaskIDDigest == "" || task.Polls < 1 || task.History[len(task.History)-1].Status != "completed" {
			b, _ := json.Marshal(task)
			t.Fatalf("inspect task = %s", b)
		}
		if doc.ProtocolSessions[0].Transport != "stdio" {
			t.Fatalf("protocolSessions = %+v", doc.ProtocolSessions)
		}
		if out := outputString(t, res.Outputs["research"]); !strings.Contains(out, "stdio") {
			t.Fatalf("output = %s", out)
		}
		// The server keeps its task store's timers after stdin closes:
		// after the grace, SIGTERM to its process group ends it.
		assertEnd(t, evs, transport.ProcessExit{ExitCode: -1, Signal: "terminated", Stopped: "sigterm"})
	})
}

// stdioCLI runs the agentctl binary in dir with exactly env and returns
// stdout, stderr and the exit code.
func stdioCLI(tb testing.TB, dir string, env []string, args ...string) (string, string, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentctlBin, args...)
	cmd.Dir, cmd.Env = dir, env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return out.String(), errb.String(), 0
	case errors.As(err, &ee) && ctx.Err() == nil:
		return out.String(), errb.String(), ee.ExitCode()
	}
	tb.Fatalf("agentctl %s: %v\nstderr:\n%s", strings.Join(args, " "), err, errb.String())
	return "", "", -1
}

// TestStdio_GetEnv: the everything server's get-env shows the environment
// it saw: exactly the declared variables plus those of the minimal set
// that agentctl's own environment has; nothing else of agentctl's (a
// canary), and the secret reference's value redacted everywhere.
func TestStdio_GetEnv(t *testing.T) {
	const canary, secret = "canary-e2e-5b1d", "token-e2e-9f3a77"
	dir := t.TempDir()
	home := t.TempDir()
	env := []string{"PATH=/usr/bin:/bin", "HOME=" + home, "LANG=C.UTF-8", "NO_COLOR=1", "E2E_CANARY=" + canary, "E2E_TOKEN=" + secret}
	wf := writeFile(t, "env.yaml", stdioWF(everything(t), []string{`env: {GREETING: "hi", TOKEN: {env: E2E_TOKEN}}`}, []string{"environmentAllowlist: [E2E_TOKEN]"},
		step{id: "env", tool: "get-env", idem: "pure"}).YAML())
	db := filepath.Join(dir, "a.db")
	stdout, stderr, code := stdioCLI(t, dir, env, "run", wf, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	var content []struct{ Text string }
	if err := json.Unmarshal(mustJSON(parseRunEnvelope(t, stdout).Data.Outputs["env"]), &content); err != nil || len(content) != 1 {
		t.Fatalf("output: %v\n%s", err, stdout)
	}
	var seen map[string]string
	if err := json.Unmarshal([]byte(content[0].Text), &seen); err != nil {
		t.Fatalf("get-env text: %v\n%s", err, content[0].Text)
	}
	var names []string
	for k := range seen {
		names = append(names, k)
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "GREETING,HOME,LANG,PATH,TOKEN" {
		t.Fatalf("the server saw variables %s, want GREETING,HOME,LANG,PATH,TOKEN", got)
	}
	if seen["GREETING"] != "hi" || seen["HOME"] != home || seen["PATH"] != "/usr/bin:/bin" || seen["TOKEN"] == "" || seen["TOKEN"] == secret {
		t.Fatalf("values %v", seen)
	}
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{secret, canary} {
		if strings.Contains(stdout+stderr, leak) || bytes.Contains(raw, []byte(leak)) {
			t.Errorf("%q reached the output or the database", leak)
		}
	}
	runID, _ := onlyRun(t, db)
	infos, _ := processFrames(t, runEvents(t, openDBAt(t, db), runID))
	if len(infos) != 1 || strings.Join(infos[0].Env, ",") != "GREETING,HOME,LANG,PATH,TOKEN" {
		t.Fatalf("mcp.process = %+v", infos)
	}
}

// TestStdio_SIGINT: Ctrl-C while a stdio server's tool runs sends
// notifications/cancelled over stdin (recorded, naming the call), the call
// ends uncertain, agentctl exits 130, and the server is stopped.
func TestStdio_SIGINT(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	wf := writeFile(t, "wf.yaml", stdioWF(everything(t), nil, nil,
		step{id: "op", tool: "trigger-long-running-operation", idem: "idempotent", args: "{duration: 60, steps: 300}"}).YAML())
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
	lr.waitFor(t, time.After(30*time.Second), "a progress line", func(l string) bool { return strings.HasPrefix(l, "  progress 1/300") })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	lr.rest()
	_ = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatal("agentctl did not exit after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != workflow.ExitCancelled {
		t.Errorf("exit %d, want %d", code, workflow.ExitCancelled)
	}
	runID, log := onlyRun(t, db)
	for line, n := range map[string]int{"mcp.notification out notifications/cancelled": 1, "mcp.request out tools/call": 1,
		"call.transition dispatched->uncertain": 1, "mcp.process_exit local": 1} {
		if count(log, line) != n {
			t.Errorf("%d × %q, want %d:\n%s", count(log, line), line, n, numbered(log))
		}
	}
	if last := log[len(log)-1]; last != "run.finished cancelled" {
		t.Errorf("run ends with %q", last)
	}
	assertCancelledNotice(t, db, runID)
	infos, _ := processFrames(t, runEvents(t, openDBAt(t, db), runID))
	assertGone(t, infos)
}

// TestStdio_READMEExample runs the README's "Local servers over stdio"
// workflow as printed (npx, commandAllowlist [npx], ./data) in a directory
// whose node_modules is interop's, with npm offline (HOME's .npmrc): npx
// runs the pinned, installed server and cannot download anything.
func TestStdio_READMEExample(t *testing.T) {
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatalf("npx not on PATH: %v", err)
	}
	root, err := tspeer.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tspeer.StdioCommand(t, tspeer.Filesystem) // installed, or fail with the hint
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Local servers over stdio\n")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```\n")
	if !ok || !ok2 || !ok3 || !strings.Contains(block, "npx") {
		t.Fatalf("README has no yaml example under \"Local servers over stdio\"")
	}
	dir, home := t.TempDir(), t.TempDir()
	if err := os.Symlink(filepath.Join(root, "interop", "node_modules"), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".npmrc"), []byte("offline=true\nupdate-notifier=false\nfund=false\naudit=false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: readme-stdio}\n" + block
	if err := os.WriteFile(filepath.Join(dir, "wf.yaml"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"PATH=" + filepath.Dir(npx) + ":/usr/bin:/bin", "HOME=" + home, "NO_COLOR=1"}
	stdout, stderr, code := stdioCLI(t, dir, env, "run", "wf.yaml", "--db", "a.db", "--output", "json")
	if code != 0 {
		t.Fatalf("README example: exit %d\n%s\n%s\n%s", code, src, stdout, stderr)
	}
	if got := outputString(t, parseRunEnvelope(t, stdout).Data.Outputs); got != `{"text":"hello"}` {
		t.Fatalf("outputs = %s", got)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "data", "note.txt")); err != nil || string(b) != "hello" {
		t.Fatalf("data/note.txt: %q, %v", b, err)
	}
	runID, log := onlyRun(t, filepath.Join(dir, "a.db"))
	if count(log, "mcp.process local") != 1 || count(log, "mcp.request out tools/call") != 2 {
		t.Fatalf("log:\n%s", numbered(log))
	}
	infos, _ := processFrames(t, runEvents(t, openDBAt(t, filepath.Join(dir, "a.db")), runID))
	if len(infos) != 1 || infos[0].Program != npx {
		t.Fatalf("mcp.process = %+v, want the program resolved on PATH (%s)", infos, npx)
	}
}
