package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// agentctlBin is the agentctl binary built once by TestMain.
var agentctlBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "agentctl-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	agentctlBin = filepath.Join(dir, "agentctl")
	// The package path works from any directory of the module.
	build := exec.Command("go", "build", "-o", agentctlBin, "github.com/agentctl/agentctl/cmd/agentctl")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "e2e: go build ./cmd/agentctl: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// openDB opens a fresh event log in a temporary directory.
func openDB(tb testing.TB) *events.DB {
	tb.Helper()
	return openDBAt(tb, filepath.Join(tb.TempDir(), "agentctl.db"))
}

func openDBAt(tb testing.TB, path string) *events.DB {
	tb.Helper()
	return testkit.OpenDB(tb, path, events.Options{})
}

// step is one task of a generated workflow: it calls tool on the remote
// "peer" through its own action declared with idem.
type step struct {
	id, tool, idem string
	args           string // YAML flow mapping; "" = {}
}

// workflowYAML is a workflow calling url (loopback only) with steps in
// order; each task's output is a workflow output named after the task.
func workflowYAML(url string, steps ...step) string {
	tasks := make([]testkit.Task, len(steps))
	for i, s := range steps {
		args := s.args
		if args == "" {
			args = "{}"
		}
		tasks[i] = testkit.Task{ID: s.id, Idempotency: s.idem, Tool: s.tool, Arguments: args}
	}
	return testkit.Workflow{Name: "e2e", Server: "peer", URL: url, Tasks: tasks, Outputs: testkit.TaskOutputs(tasks)}.YAML()
}

// runWorkflow parses src and runs it with workflow.Runner against a fresh
// database; a storage error before run.created fails the test.
func runWorkflow(tb testing.TB, ctx context.Context, src string, observe func(events.Event)) (*workflow.Result, *events.DB) {
	tb.Helper()
	wf, err := spec.Parse("e2e.yaml", []byte(src))
	if err != nil {
		tb.Fatalf("parse workflow: %v\n%s", err, src)
	}
	db := openDB(tb)
	res, err := (&workflow.Runner{DB: db, UserAgent: "agentctl-e2e", Observe: observe}).Run(ctx, wf, nil, workflow.RunOptions{})
	if err != nil {
		tb.Fatalf("run: %v", err)
	}
	return res, db
}

// exitCode is the exit code a run ended with (0 when it succeeded).
func exitCode(res *workflow.Result) int {
	var we *workflow.Error
	if errors.As(res.Err, &we) {
		return we.Code
	}
	return res.ExitCode
}

// runEvents reads the whole log of a run.
func runEvents(tb testing.TB, db *events.DB, runID string) []events.Event {
	tb.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		tb.Fatalf("read events of %s: %v", runID, err)
	}
	return evs
}

// describe renders a run's log through projector.Describe, one line per event.
func describe(tb testing.TB, db *events.DB, runID string) []string {
	tb.Helper()
	evs := runEvents(tb, db, runID)
	out := make([]string, len(evs))
	var d projector.Describer
	for i, e := range evs {
		out[i] = d.Describe(e)
	}
	return out
}

// assertEvents compares a run's described log with want, exactly and in order.
func assertEvents(tb testing.TB, db *events.DB, runID string, want []string) {
	tb.Helper()
	got := describe(tb, db, runID)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		tb.Fatalf("event log of %s:\n%s\nwant:\n%s", runID, numbered(got), numbered(want))
	}
}

func numbered(lines []string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%3d  %s\n", i+1, l)
	}
	return b.String()
}

// count returns how many described events equal line.
func count(lines []string, line string) int {
	n := 0
	for _, l := range lines {
		if names(l, line) {
			n++
		}
	}
	return n
}

// names reports whether the described line l is the event line names: l
// itself, the fact with the move it carries aside ("mcp.request out
// tools/call" is also "mcp.request out tools/call prepared->dispatched"),
// or "call.transition A->B" for the fact that carries that move.
func names(l, line string) bool {
	if l == line {
		return true
	}
	i := strings.LastIndexByte(l, ' ')
	if i < 0 || !strings.Contains(l[i:], "->") {
		return false
	}
	if l[:i] == line {
		return true
	}
	want, ok := strings.CutPrefix(line, "call.transition ")
	return ok && l[i+1:] == want
}

// verifyChain checks the run's hash chain and that the projections rebuilt
// from the log equal the incremental ones.
func verifyChain(tb testing.TB, db *events.DB, runID string) {
	tb.Helper()
	if _, err := db.VerifyRun(context.Background(), runID); err != nil {
		tb.Fatalf("verify %s: %v", runID, err)
	}
}

// decodeAll decodes the payloads of events of type typ.
func decodeAll[T any](tb testing.TB, evs []events.Event, typ string) []T {
	tb.Helper()
	var out []T
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		var v T
		if err := e.Decode(&v); err != nil {
			tb.Fatalf("decode %s #%d: %v", typ, e.Seq, err)
		}
		out = append(out, v)
	}
	return out
}

// frames returns the decoded frames of a run whose method is method.
func frames(tb testing.TB, evs []events.Event, method string) []vocab.Frame {
	tb.Helper()
	var out []vocab.Frame
	for _, e := range evs {
		if !strings.HasPrefix(e.Type, vocab.FramePrefix) {
			continue
		}
		var f vocab.Frame
		if err := e.Decode(&f); err != nil {
			tb.Fatalf("decode frame #%d: %v", e.Seq, err)
		}
		if f.Method == method {
			out = append(out, f)
		}
	}
	return out
}

// writeFile writes a workflow into a temp dir and returns its path.
func writeFile(tb testing.TB, name, src string) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// cliTimeout bounds every agentctl subprocess.
const cliTimeout = 60 * time.Second

// agentctl runs the built binary to completion with args and returns its
// stdout, stderr and exit code.
func agentctl(tb testing.TB, args ...string) (string, string, int) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cliTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, agentctlBin, args...)
	cmd.Env = cliEnv()
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

// cliEnv is the subprocess environment: ours minus anything that changes
// agentctl's behaviour.
func cliEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AGENTCTL_") || strings.HasPrefix(kv, "NO_COLOR=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "NO_COLOR=1")
}

// runEnvelope is the --output json answer of `agentctl run`.
type runEnvelope struct {
	Kind string `json:"kind"`
	OK   bool   `json:"ok"`
	Data struct {
		RunID    string         `json:"runId"`
		State    string         `json:"state"`
		ExitCode int            `json:"exitCode"`
		Outputs  map[string]any `json:"outputs"`
		Error    *string        `json:"error"`
	} `json:"data"`
}

func parseRunEnvelope(tb testing.TB, stdout string) runEnvelope {
	tb.Helper()
	var env runEnvelope
	if err := json.Unmarshal([]byte(stdout), &env); err != nil || env.Kind != "RunResult" {
		tb.Fatalf("stdout is not a RunResult envelope (%v):\n%s", err, stdout)
	}
	return env
}

// lineReader delivers a subprocess's stream line by line, so that a test
// can wait for a line (never for a duration).
type lineReader struct {
	lines chan string
}

func newLineReader(r io.Reader) *lineReader {
	lr := &lineReader{lines: make(chan string, 1024)}
	go func() {
		defer close(lr.lines)
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			lr.lines <- sc.Text()
		}
	}()
	return lr
}

// waitFor reads lines until one satisfies match, returning it and the lines
// read before it; it fails the test if the stream ends or deadline passes.
func (lr *lineReader) waitFor(tb testing.TB, deadline <-chan time.Time, what string, match func(string) bool) (string, []string) {
	tb.Helper()
	var seen []string
	for {
		select {
		case l, ok := <-lr.lines:
			if !ok {
				tb.Fatalf("stream ended before %s; read:\n%s", what, strings.Join(seen, "\n"))
			}
			if match(l) {
				return l, seen
			}
			seen = append(seen, l)
		case <-deadline:
			tb.Fatalf("no %s before the deadline; read:\n%s", what, strings.Join(seen, "\n"))
		}
	}
}

// rest drains the remaining lines (the stream must end, e.g. on exit).
func (lr *lineReader) rest() []string {
	var out []string
	for l := range lr.lines {
		out = append(out, l)
	}
	return out
}

// jsonRPCMethod reads the JSON-RPC method of a POST body ("" for a batch or
// a response) and puts the body back for the next handler.
func jsonRPCMethod(r *http.Request) (string, error) {
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	var msg struct {
		Method string `json:"method"`
	}
	_ = json.Unmarshal(body, &msg)
	return msg.Method, nil
}

// transitions returns the call transitions a run's events record (moves on
// facts, or call.transition events), with From set.
func transitions(tb testing.TB, evs []events.Event) []vocab.CallTransition {
	tb.Helper()
	ts, err := projector.Transitions(evs)
	if err != nil {
		tb.Fatal(err)
	}
	return ts
}
