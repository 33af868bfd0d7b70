package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// barrier is a tool that counts the calls in flight on the server and
// holds each until want of them are in flight together (or a safety bound
// passes, so that a run that never gets there fails instead of hanging).
type barrier struct {
	want     int
	mu       sync.Mutex
	inFlight int
	max      int
	released bool
	release  chan struct{}
}

func newBarrier(want int) *barrier { return &barrier{want: want, release: make(chan struct{})} }

func (b *barrier) tool(name string) mcptest.ToolDef {
	return mcptest.ToolDef{Name: name, Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		b.mu.Lock()
		b.inFlight++
		b.max = max(b.max, b.inFlight)
		if b.inFlight == b.want && !b.released {
			b.released = true
			close(b.release)
		}
		b.mu.Unlock()
		select {
		case <-b.release:
		case <-ctx.Done():
		case <-time.After(20 * time.Second): // a safety bound, not a synchronisation
		}
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"ok": true}}, nil
	}}
}

func (b *barrier) maxInFlight() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.max
}

// graphTask is one task of a generated workflow.
type graphTask struct {
	id, tool, action string
	needs            *[]string // nil: no needs key
	extra            string    // more keys of the task, YAML flow-free lines
}

// graphWorkflow writes a workflow with actions ok (idempotent), once
// (unknown), amo (at_most_once) and retrying (idempotent, one retry after
// 1 s) on url and the given tasks.
func graphWorkflow(t *testing.T, url string, concurrency int, tasks []graphTask) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: graph}
spec:
`)
	if concurrency > 0 {
		fmt.Fprintf(&b, "  concurrency: %d\n", concurrency)
	}
	fmt.Fprintf(&b, `  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    ok: {kind: mcp.call, idempotency: idempotent}
    once: {kind: mcp.call}
    amo: {kind: mcp.call, idempotency: at_most_once}
    retrying: {kind: mcp.call, idempotency: idempotent, retry: {maxAttempts: 2, initialIntervalSeconds: 1}}
  tasks:
`, url)
	for _, tk := range tasks {
		action := tk.action
		if action == "" {
			action = "ok"
		}
		fmt.Fprintf(&b, "    - id: %s\n      uses: action:%s\n      with: {server: local, tool: %s}\n", tk.id, action, tk.tool)
		if tk.needs != nil {
			fmt.Fprintf(&b, "      needs: [%s]\n", strings.Join(*tk.needs, ", "))
		}
		if tk.extra != "" {
			fmt.Fprintf(&b, "      %s\n", tk.extra)
		}
	}
	path := filepath.Join(t.TempDir(), "graph.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func none() *[]string { return &[]string{} }

// inspectTasks returns the tasks rows of a run as inspect shows them.
func inspectTasks(t *testing.T, db, runID string) []map[string]any {
	t.Helper()
	out, stderr, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect exit %d: %s", code, stderr)
	}
	var env struct {
		Data struct {
			Tasks []map[string]any `json:"tasks"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatal(err)
	}
	return env.Data.Tasks
}

// runJSON runs args with --output json and returns the run id and exit code.
func runJSON(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	out, stderr, code := cli(t, append(args, "--output", "json")...)
	id, err := decodeRunID(out)
	if err != nil {
		// a failed run prints its envelope on stderr
		var eenv struct {
			Error struct {
				RunID string `json:"runId"`
			} `json:"error"`
		}
		if json.Unmarshal([]byte(lastLine(stderr)), &eenv) == nil {
			id = eenv.Error.RunID
		}
	}
	return id, stderr, code
}

// runIDIn is the run id a human run printed ("run RUN_ID state").
func runIDIn(t *testing.T, stderr string) string {
	t.Helper()
	for _, l := range strings.Split(stderr, "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "run" && strings.HasPrefix(f[1], "run-") {
			return f[1]
		}
	}
	t.Fatalf("no run id in:\n%s", stderr)
	return ""
}

// summaryRow reports whether the summary table has a row for task whose
// columns include want.
func summaryRow(stderr, task, want string) bool {
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, task+" ") && strings.Contains(l, "  "+want+"  ") {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// TestCLI_ConcurrentTasksInFlight: eight independent tasks are in flight on
// the server together with concurrency 8 (the server's own count), one at
// a time with --concurrency 1.
func TestCLI_ConcurrentTasksInFlight(t *testing.T) {
	for _, tc := range []struct {
		name string
		flag []string
		want int
	}{
		{"spec concurrency 8", nil, 8},
		{"flag concurrency 1", []string{"--concurrency", "1"}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBarrier(tc.want)
			srv := mcptest.Start(t, mcptest.Options{}, b.tool("wait"))
			var tasks []graphTask
			for i := range 8 {
				tasks = append(tasks, graphTask{id: fmt.Sprintf("t%d", i), tool: "wait", needs: none()})
			}
			db := filepath.Join(t.TempDir(), "a.db")
			args := append([]string{"run", graphWorkflow(t, srv.URL, 8, tasks), "--db", db}, tc.flag...)
			runID, stderr, code := runJSON(t, args...)
			if code != 0 {
				t.Fatalf("run exit %d: %s", code, stderr)
			}
			if got := b.maxInFlight(); got != tc.want {
				t.Fatalf("server saw at most %d calls in flight, want %d", got, tc.want)
			}
			if st := srv.Stats(); st.Calls["wait"] != 8 || st.Initialize != 1 {
				t.Fatalf("server saw %d calls and %d sessions, want 8 on one session", st.Calls["wait"], st.Initialize)
			}
			rows := inspectTasks(t, db, runID)
			if len(rows) != 8 {
				t.Fatalf("inspect shows %d task rows, want 8", len(rows))
			}
			for _, r := range rows {
				if r["state"] != "succeeded" {
					t.Fatalf("task row %v", r)
				}
			}
			if _, stderr, code := cli(t, "audit", "export", runID, "--db", db, "-o", filepath.Join(t.TempDir(), "a.jsonl")); code != 0 {
				t.Fatalf("audit export exit %d: %s", code, stderr)
			}
		})
	}
}

func okTool(name string) mcptest.ToolDef {
	return mcptest.ToolDef{Name: name, Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"ok": true}}, nil
	}}
}

func badTool(name string) mcptest.ToolDef {
	return mcptest.ToolDef{Name: name, Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return nil, errors.New("refused")
	}}
}

// TestCLI_FailurePolicy: a failed task skips the tasks not yet started
// (task.skipped rows with the reason, in inspect and the summary),
// continueOnError lets the run go on with a null output, and the run ends
// with its worst task.
func TestCLI_FailurePolicy(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("good"), badTool("bad"), okTool("lost"))
	t.Run("failed skips the rest", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "a.db")
		wf := graphWorkflow(t, srv.URL, 1, []graphTask{
			{id: "first", tool: "good"},
			{id: "broken", tool: "bad"},
			{id: "after", tool: "good"},
			{id: "apart", tool: "good", needs: none()},
		})
		calls := srv.Stats().Calls["good"]
		_, stderr, code := cli(t, "run", wf, "--db", db)
		if code != 4 {
			t.Fatalf("run exit %d, want 4: %s", code, stderr)
		}
		runID := runIDIn(t, stderr)
		if got := srv.Stats().Calls["good"] - calls; got != 1 {
			t.Fatalf("server saw %d good calls, want 1 (the others skipped)", got)
		}
		for _, task := range []string{"after", "apart"} {
			if !summaryRow(stderr, task, "skipped: task broken ended failed") {
				t.Errorf("summary has no row %s skipped with the reason:\n%s", task, stderr)
			}
		}
		rows := inspectTasks(t, db, runID)
		got := map[string]string{}
		for _, r := range rows {
			s := r["state"].(string)
			if s == "skipped" {
				s += ": " + r["error"].(string)
			}
			got[r["taskId"].(string)] = s
		}
		want := map[string]string{"first": "succeeded", "broken": "failed", "after": "skipped: task broken ended failed", "apart": "skipped: task broken ended failed"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("task rows %v, want %v", got, want)
		}
	})
	t.Run("continueOnError goes on", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "a.db")
		wf := graphWorkflow(t, srv.URL, 1, []graphTask{
			{id: "broken", tool: "bad", extra: "continueOnError: true"},
			{id: "after", tool: "good"},
		})
		runID, stderr, code := runJSON(t, "run", wf, "--db", db)
		if code != 0 {
			t.Fatalf("run exit %d, want 0: %s", code, stderr)
		}
		got := map[string]any{}
		for _, r := range inspectTasks(t, db, runID) {
			got[r["taskId"].(string)] = r["state"]
		}
		if got["broken"] != "failed" || got["after"] != "succeeded" {
			t.Fatalf("task rows %v", got)
		}
	})
	t.Run("uncertain beats failed", func(t *testing.T) {
		srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "lost", Status: http.StatusNotFound, Nth: 1})
		db := filepath.Join(t.TempDir(), "a.db")
		wf := graphWorkflow(t, srv.URL, 2, []graphTask{
			{id: "broken", tool: "bad", needs: none()},
			{id: "vanished", tool: "lost", action: "once", needs: none()},
			{id: "later", tool: "good", needs: &[]string{"broken", "vanished"}},
		})
		runID, stderr, code := runJSON(t, "run", wf, "--db", db)
		if code != 3 {
			t.Fatalf("run exit %d, want 3 (uncertain): %s", code, stderr)
		}
		got := map[string]any{}
		for _, r := range inspectTasks(t, db, runID) {
			got[r["taskId"].(string)] = r["state"]
		}
		if got["broken"] != "failed" || got["vanished"] != "uncertain" || got["later"] != "skipped" {
			t.Fatalf("task rows %v", got)
		}
	})
}
