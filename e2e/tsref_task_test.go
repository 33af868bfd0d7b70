package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/internal/tspeer"
	"github.com/agentctl/agentctl/projector"
)

// TestTS_TaskCLI: `mcp call` of the reference server's task-required
// simulate-research-query succeeds as an MCP task, and a resume after
// agentctl is killed (SIGKILL) while it polls asks about the same task:
// the server saw exactly one tools/call, for an at_most_once action.
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

	// Killed (SIGKILL) while it polls, then resumed: with encryption on,
	// the resumed run reattaches the recorded session and asks about the
	// same task (exactly one tools/call, one initialize); with encryption
	// off the session id was never stored, the resume asks on a new
	// session, and the reference server keeps its tasks per session: the
	// task is lost, and the at_most_once call ends uncertain (exit 3),
	// still sent once.
	for _, mode := range []string{"sealed", "clear"} {
		t.Run("kill -9 while polling, then resume/"+mode, func(t *testing.T) { killAndResumeTask(t, url, mode == "sealed") })
	}
}

func killAndResumeTask(t *testing.T, url string, sealed bool) {
	dbPath := filepath.Join(t.TempDir(), "a.db")
	var keyEnv []string
	if sealed {
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		k := base64.StdEncoding.EncodeToString(key)
		keyEnv = []string{"MY_KEY=" + k, "AGENTCTL_KEY_K1=" + k}
		t.Setenv("AGENTCTL_KEY_K1", k) // this process reads the sealed log too
	}
	command := func(ctx context.Context, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, agentctlBin, args...)
		cmd.Env = append(cliEnv(), keyEnv...)
		return cmd
	}
	run := func(args ...string) (string, string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
		defer cancel()
		var out, errb bytes.Buffer
		cmd := command(ctx, args...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && (!errors.As(err, &ee) || ctx.Err() != nil) {
			t.Fatalf("agentctl %s: %v\n%s", strings.Join(args, " "), err, errb.String())
		}
		return out.String(), errb.String(), cmd.ProcessState.ExitCode()
	}
	if sealed {
		if _, stderr, code := run("db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", dbPath); code != 0 {
			t.Fatalf("enable encryption exit %d: %s", code, stderr)
		}
	}
	wf := writeFile(t, "wf.yaml", workflowYAML(url, step{id: "research", tool: "simulate-research-query", idem: "at_most_once", args: "{topic: mcp}"}))
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := command(ctx, "run", wf, "--db", dbPath, "--output", "jsonl")
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
	out, stderr, code := run("resume", ids[0], "--db", dbPath, "--output", "json")
	want := map[bool]int{true: 0, false: 3}[sealed]
	if code != want || (!sealed && !strings.Contains(stderr, "task_lost")) {
		t.Fatalf("resume exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, want, out, stderr)
	}
	evs := runEvents(t, db, ids[0])
	if n := len(frames(t, evs, "tools/call")); n != 1 {
		t.Fatalf("%d tools/call frames, want 1", n)
	}
	initialize := map[bool]int{true: 1, false: 2}[sealed]
	if n := len(frames(t, evs, "initialize")); n != initialize {
		t.Fatalf("%d initialize frames, want %d", n, initialize)
	}
	log := strings.Join(describe(t, db, ids[0]), "\n")
	end := map[bool]string{true: "run.finished succeeded", false: "run.finished uncertain"}[sealed]
	if strings.Contains(log, "session.reattached") != sealed || !strings.Contains(log, end) {
		t.Fatalf("log:\n%s", log)
	}
	if !sealed { // the session id, a bearer credential, is in no payload
		var accepted vocab.CallTaskAccepted
		for _, e := range evs {
			if e.Type == vocab.TypeCallTaskAccepted {
				if err := e.Decode(&accepted); err != nil {
					t.Fatal(err)
				}
			}
		}
		if accepted.SessionID != "" || accepted.SessionIDDigest == "" {
			t.Fatalf("call.task_accepted keeps session id %q (digest %q)", accepted.SessionID, accepted.SessionIDDigest)
		}
	}
	if out, stderr, rcode := run("replay", ids[0], "--db", dbPath, "--output", "json"); rcode != code {
		t.Fatalf("replay of the resumed run exit %d, resume's %d\nstdout:\n%s\nstderr:\n%s", rcode, code, out, stderr)
	}
}
