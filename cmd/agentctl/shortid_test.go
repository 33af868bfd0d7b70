package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// listedRuns is runs list --output json: short form and mode by run id.
func listedRuns(t *testing.T, db string, args ...string) map[string][2]string {
	t.Helper()
	out, stderr, code := cli(t, append([]string{"runs", "list", "--db", db, "--output", "json"}, args...)...)
	if code != 0 {
		t.Fatalf("runs list %v: exit %d %s", args, code, stderr)
	}
	var env struct {
		Data []struct {
			RunID   string `json:"runId"`
			ShortID string `json:"shortId"`
			Mode    string `json:"mode"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatal(err)
	}
	m := map[string][2]string{}
	for _, r := range env.Data {
		m[r.RunID] = [2]string{r.ShortID, r.Mode}
	}
	return m
}

// inspectedID is the run id inspect REF resolves to, or "" and the error.
func inspectedID(t *testing.T, db, ref string) (string, string) {
	t.Helper()
	out, stderr, code := cli(t, "inspect", ref, "--db", db, "--output", "json")
	if code != 0 {
		return "", stderr
	}
	var env struct {
		Data struct {
			Run struct {
				RunID string `json:"runId"`
			} `json:"run"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatal(err)
	}
	return env.Data.Run.RunID, ""
}

// TestCLI_ShortIDsForgedCollisions: the short form is the shortest suffix
// of at least 8 digits that names one run: two runs whose last 8 digits
// agree get 9, and a suffix that is also the start of other runs' uuids
// (a prefix, which every command takes too) is lengthened; each short form
// resolves to its run in every command, and the shared 8-digit suffix is
// refused (exit 2) listing both candidates.
func TestCLI_ShortIDsForgedCollisions(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	path := filepath.Join(t.TempDir(), "a.db")
	wf, err := spec.Load(actWorkflow(t, srv.URL, "idempotent"))
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{
		"run-019a0000-0000-7000-8000-0001cccc1111",
		"run-019a0000-0001-7000-8000-0002cccc1111",
		"run-019a0000-0002-7000-8000-00000000dddd",
		"run-019b0000-0000-7000-8000-0000019a0000", // its last 8 start the others' uuids
	}
	want := map[string]string{ids[0]: "1cccc1111", ids[1]: "2cccc1111", ids[2]: "0000dddd", ids[3]: "0019a0000"}
	func() {
		db := testkit.OpenDB(t, path, events.Options{})
		for _, id := range ids {
			r := &workflow.Runner{DB: db, NewRunID: func() string { return id }}
			if res, err := r.Run(context.Background(), wf, map[string]any{}, workflow.RunOptions{}); err != nil || res.Err != nil {
				t.Fatalf("run %s: %v %v", id, err, res.Err)
			}
		}
	}()
	listed := listedRuns(t, path)
	for _, id := range ids {
		if got := listed[id][0]; got != want[id] {
			t.Errorf("short form of %s = %q, want %q", id, got, want[id])
		}
		for _, args := range [][]string{{"inspect", want[id]}, {"effects", "list", want[id]}, {"audit", "export", want[id]}, {"db", "rebuild-projections", want[id]}} {
			out, stderr, code := cli(t, append(args, "--db", path, "--output", "json")...)
			if code != 0 || !strings.Contains(out, id) && args[0] != "db" {
				t.Errorf("%v: exit %d %s\n%.300s", args, code, stderr, out)
			}
		}
		if _, stderr, code := cli(t, "resume", want[id], "--db", path); code != 2 || !strings.Contains(stderr, "run finished succeeded; there is nothing to resume") {
			t.Errorf("resume %s (a finished run): exit %d %s", want[id], code, stderr)
		}
	}
	out, _, _ := cli(t, "runs", "list", "--db", path)
	for _, id := range ids {
		if !regexp.MustCompile(`(?m)^` + want[id] + ` +act-once +run +succeeded `).MatchString(out) {
			t.Errorf("human runs list lacks the row of %s as %s:\n%s", id, want[id], out)
		}
	}
	_, stderr, code := cli(t, "inspect", "cccc1111", "--db", path)
	if code != 2 || !strings.Contains(stderr, "is ambiguous") || !strings.Contains(stderr, ids[0]) || !strings.Contains(stderr, ids[1]) {
		t.Fatalf("the shared suffix: exit %d, want 2 listing both runs:\n%s", code, stderr)
	}
	if got, _ := inspectedID(t, path, "019a0000"); got != "" {
		t.Fatalf("019a0000 (a prefix of three runs, the suffix of one) resolved to %s", got)
	}
}

// TestCLI_ShortIDsAndLast: runs started within a second share their first
// 8 digits (the README's old prefix is ambiguous), while the short form
// run prints first and runs list shows is 8 digits, unique, and taken by
// every command. "last" is the last workflow run: not a check --remote,
// an ad hoc call or a replay made after it, so resume last --retry-failed
// right after a check resumes the failed run; last-check, last-adhoc and
// last-replay name those, and runs list --mode filters by mode.
func TestCLI_ShortIDsAndLast(t *testing.T) {
	var fail atomic.Bool
	flaky := actTool()
	inner := flaky.Handler
	flaky.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		if fail.Load() {
			return &mcptest.Result{Content: mcptest.Text("not yet"), IsError: true}, nil
		}
		return inner(ctx, c)
	}
	srv := mcptest.Start(t, mcptest.Options{}, flaky)
	db := filepath.Join(t.TempDir(), "a.db")
	wf := actWorkflow(t, srv.URL, "idempotent")
	var runs, shorts []string
	first := regexp.MustCompile(`^run ([0-9a-f]{8}) started \((run-[0-9a-f-]{36})\)$`)
	for range 3 {
		_, stderr, code := cli(t, "run", wf, "--db", db)
		line, _, _ := strings.Cut(stderr, "\n")
		m := first.FindStringSubmatch(line)
		if code != 0 || m == nil || !strings.HasSuffix(m[2], m[1]) {
			t.Fatalf("run: exit %d, first line %q is not its short form and its id", code, line)
		}
		shorts, runs = append(shorts, m[1]), append(runs, m[2])
	}
	if p := runs[0][:12]; strings.HasPrefix(runs[1], p) && strings.HasPrefix(runs[2], p) {
		// Within the same ~65 s, the README's old 8-digit prefix names them all.
		if got, _ := inspectedID(t, db, p[4:]); got != "" {
			t.Fatalf("the shared 8-digit prefix %s resolved to %s", p[4:], got)
		}
	}
	listed := listedRuns(t, db)
	for i, id := range runs {
		if listed[id][0] != shorts[i] {
			t.Errorf("runs list short form of %s = %q, run printed %q", id, listed[id][0], shorts[i])
		}
		if got, e := inspectedID(t, db, shorts[i]); got != id {
			t.Errorf("inspect %s = %q %s, want %s", shorts[i], got, e, id)
		}
	}

	// A failed workflow run, then runs of the other modes after it.
	fail.Store(true)
	_, stderr, code := cli(t, "run", wf, "--db", db)
	if code == 0 {
		t.Fatalf("run with the tool failing: exit 0 %s", stderr)
	}
	failed := runIDIn(t, stderr)
	fail.Store(false)
	if _, stderr, code := cli(t, "replay", runs[2], "--db", db); code != 0 {
		t.Fatalf("replay: exit %d %s", code, stderr)
	}
	if _, stderr, code := cli(t, "mcp", "call", srv.URL, "act", "--args", `{"n":1}`, "--allow-private", "--db", db); code != 0 {
		t.Fatalf("mcp call: exit %d %s", code, stderr)
	}
	if _, stderr, code := cli(t, "check", wf, "--remote", "--db", db); code != 0 {
		t.Fatalf("check --remote: exit %d %s", code, stderr)
	}
	for _, mode := range []string{"run", "replay", "check", "adhoc"} {
		got := listedRuns(t, db, "--mode", mode)
		var last string
		for id, v := range got {
			if v[1] != mode {
				t.Fatalf("runs list --mode %s lists %s of mode %s", mode, id, v[1])
			}
			last = id
		}
		if want := map[string]int{"run": 4, "replay": 1, "check": 1, "adhoc": 1}[mode]; len(got) != want {
			t.Fatalf("runs list --mode %s: %d runs, want %d", mode, len(got), want)
		}
		if mode == "run" {
			last = failed
		}
		if got, e := inspectedID(t, db, "last-"+mode); got != last {
			t.Errorf("inspect last-%s = %q %s, want %s", mode, got, e, last)
		}
	}
	if got, e := inspectedID(t, db, "last"); got != failed {
		t.Fatalf("inspect last after a replay, an ad hoc call and a check = %q %s, want the last workflow run %s", got, e, failed)
	}
	if _, stderr, code := cli(t, "runs", "list", "--mode", "worker", "--db", db); code != 2 || !strings.Contains(stderr, "run, replay, check, adhoc") {
		t.Fatalf("runs list --mode worker: exit %d %s", code, stderr)
	}
	_, stderr, code = cli(t, "resume", "last", "--retry-failed", "--db", db)
	if code != 0 || !strings.Contains(stderr, "run "+failed+" succeeded") {
		t.Fatalf("resume last --retry-failed right after a check: exit %d\n%s", code, stderr)
	}
}
