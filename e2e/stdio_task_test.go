package e2e

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/workflow"
)

// MCP tasks of a stdio server (the reference everything server's
// simulate-research-query): Ctrl-C, and kill -9 then resume.

// TestStdio_TaskKilledThenResumed: agentctl is killed (SIGKILL) while it
// polls an MCP task of a stdio server. The server dies with it, and its
// task with the process: resume does not try to reattach (a stdio session
// has no id) but treats the task as lost, and the class rules decide: an
// at_most_once call ends uncertain (task_lost) with no second tools/call;
// an idempotent one is sent once more, as a new task on a new process
// (generation 2), and succeeds. The resumed run replays to the same end.
func TestStdio_TaskKilledThenResumed(t *testing.T) {
	for _, tc := range []struct {
		idem       string
		code       int
		calls      int
		processes  int
		transition string
	}{
		{"at_most_once", workflow.ExitUncertain, 1, 1, "call.transition polling->uncertain"},
		{"idempotent", workflow.ExitOK, 2, 2, "call.transition polling->reconnecting"},
	} {
		t.Run(tc.idem, func(t *testing.T) {
			dbPath := filepath.Join(t.TempDir(), "a.db")
			wf := writeFile(t, "wf.yaml", stdioWF(everything(t), nil, nil, step{id: "research", tool: "simulate-research-query", idem: tc.idem, args: "{topic: stdio}"}).YAML())
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
			lr := newLineReader(stdout)
			lr.waitFor(t, time.After(30*time.Second), "a task status", func(l string) bool { return strings.Contains(l, `"call.task_status"`) })
			_ = cmd.Process.Kill() // SIGKILL: no deferred code runs
			_ = cmd.Wait()
			runID, _ := onlyRun(t, dbPath)
			db := openDBAt(t, dbPath)
			infos, _ := processFrames(t, runEvents(t, db, runID))
			deadline := time.Now().Add(10 * time.Second)
			for _, p := range infos { // the parent-death signal is delivered asynchronously
				for alive(p.PID, p.StartTime) && time.Now().Before(deadline) {
					time.Sleep(5 * time.Millisecond)
				}
			}
			assertGone(t, infos)
			out, stderr, code := agentctl(t, "resume", runID, "--db", dbPath, "--output", "json")
			if code != tc.code {
				t.Fatalf("resume exit %d, want %d\n%s\n%s", code, tc.code, out, stderr)
			}
			evs := runEvents(t, db, runID)
			log := describe(t, db, runID)
			if n := len(frames(t, evs, "tools/call")); n != tc.calls {
				t.Fatalf("%d tools/call frames, want %d\n%s", n, tc.calls, numbered(log))
			}
			if count(log, tc.transition) != 1 || count(log, "session.reattached") != 0 {
				t.Fatalf("log:\n%s", numbered(log))
			}
			infos, exits := processFrames(t, evs)
			if len(infos) != tc.processes || len(exits) != tc.processes-1 { // the killed run recorded no end for its process
				t.Fatalf("process frames %+v / %+v", infos, exits)
			}
			assertGone(t, infos)
			trs := transitions(t, evs)
			lost := false
			for _, tr := range trs {
				lost = lost || (tr.Trigger == "task_lost" && strings.Contains(tr.Reason, "stdio server"))
			}
			if !lost {
				t.Fatalf("no task_lost transition naming the stdio server: %+v", trs)
			}
			if _, stderr, rcode := agentctl(t, "replay", runID, "--db", dbPath, "--output", "json"); rcode != code {
				t.Fatalf("replay exit %d, resume's %d\n%s", rcode, code, stderr)
			}
		})
	}
}

// TestStdio_SIGINTCancelsTask: Ctrl-C while agentctl polls a stdio
// server's MCP task sends tasks/cancel over stdin; the server confirms,
// the call ends cancelled, agentctl exits 130, and the server is stopped.
func TestStdio_SIGINTCancelsTask(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	wf := writeFile(t, "wf.yaml", stdioWF(everything(t), nil, nil, step{id: "research", tool: "simulate-research-query", idem: "at_most_once", args: "{topic: stdio}"}).YAML())
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentctlBin, "run", wf, "--db", db, "--output", "jsonl")
	cmd.Env = cliEnv()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lr := newLineReader(stdout)
	lr.waitFor(t, time.After(30*time.Second), "a task status", func(l string) bool { return strings.Contains(l, `"call.task_status"`) })
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	lr.rest()
	_ = cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != workflow.ExitCancelled {
		t.Errorf("exit %d, want %d", code, workflow.ExitCancelled)
	}
	runID, log := onlyRun(t, db)
	for line, n := range map[string]int{"mcp.request out tools/call": 1, "mcp.request out tasks/cancel": 1,
		"call.transition cancelling->cancelled": 1, "mcp.process_exit local": 1, "run.finished cancelled": 1} {
		if count(log, line) != n {
			t.Errorf("%d × %q, want %d:\n%s", count(log, line), line, n, numbered(log))
		}
	}
	evs := runEvents(t, openDBAt(t, db), runID)
	cancels := decodeAll[vocab.CallTaskCancel](t, evs, vocab.TypeCallTaskCancel)
	if len(cancels) != 1 || !cancels[0].Confirmed || cancels[0].Cause != "user" {
		t.Fatalf("call.task_cancel = %+v", cancels)
	}
	infos, _ := processFrames(t, evs)
	assertGone(t, infos)
}
