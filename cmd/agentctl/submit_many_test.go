package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// qTool is the "look" tool of inputsWorkflow, remembering every q it got.
type qTool struct {
	mu sync.Mutex
	qs []string
}

func (qt *qTool) def() mcptest.ToolDef {
	return mcptest.ToolDef{Name: "look", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		var a struct{ Q string }
		_ = json.Unmarshal(c.Arguments, &a)
		qt.mu.Lock()
		qt.qs = append(qt.qs, a.Q)
		qt.mu.Unlock()
		return &mcptest.Result{Content: mcptest.Text("looked"), StructuredContent: map[string]any{"match": true}}, nil
	}}
}

// got is the sorted q values the server received.
func (qt *qTool) got() []string {
	qt.mu.Lock()
	defer qt.mu.Unlock()
	s := slices.Clone(qt.qs)
	slices.Sort(s)
	return s
}

func writeLines(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "runs.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCLI_SubmitInputsFile (issue 34 item 2): submit --inputs queues one run
// per JSON line in one process (a blank line skipped), each recorded as a
// single submit would be, and a worker drains them: the server gets each
// line's input in both tasks of its run, and every run succeeds.
func TestCLI_SubmitInputsFile(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		tool := &qTool{}
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		wf := inputsWorkflow(t, srv.URL)
		file := writeLines(t, `{"q": "a"}`, ``, `{"q": "b"}`, `  {"q": "c"}  `)
		out, stderr, code := cli(t, "submit", wf, "--inputs", file, "--db", db)
		if code != 0 {
			t.Fatalf("submit exit %d: %s", code, stderr)
		}
		ids := strings.Fields(out)
		if len(ids) != 3 {
			t.Fatalf("submit printed %d ids, want 3:\n%s", len(ids), out)
		}
		for _, id := range ids {
			if got := describe(t, db, id); len(got) != 1 || !strings.HasPrefix(got[0], "run.created") {
				t.Fatalf("run %s before the worker: %v, want run.created alone", id, got)
			}
		}
		if n := len(tool.got()); n != 0 {
			t.Fatalf("submit sent %d calls, want none", n)
		}
		if out, stderr, code := cli(t, "worker", "--drain", "--db", db, "--output", "json"); code != 0 {
			t.Fatalf("worker exit %d: %s\n%s", code, stderr, out)
		}
		if got, want := tool.got(), []string{"a", "a", "b", "b", "c", "c"}; !slices.Equal(got, want) {
			t.Fatalf("the server got q = %v, want %v", got, want)
		}
		for _, id := range ids {
			if got := describe(t, db, id); got[len(got)-1] != "run.finished succeeded" {
				t.Fatalf("run %s: %v", id, got)
			}
		}
	})
}

// TestCLI_SubmitInputsBadLine: a line that is not a JSON object, or whose
// inputs the workflow refuses, stops submit with exit 2 naming FILE:LINE;
// the runs of the lines before it stay queued (and only they run), nothing
// of the bad line or after it is recorded.
func TestCLI_SubmitInputsBadLine(t *testing.T) {
	tool := &qTool{}
	srv := mcptest.Start(t, mcptest.Options{}, tool.def())
	wf := inputsWorkflow(t, srv.URL)
	for _, tc := range []struct{ name, bad, want string }{
		{"not-json", `q=b`, ":2: expected a JSON object"},
		{"array", `["b"]`, ":2: expected a JSON object"},
		{"wrong-type", `{"q": 7}`, ":2: "},
		{"unknown-input", `{"q": "b", "nope": 1}`, ":2: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "a.db")
			file := writeLines(t, `{"q": "a"}`, tc.bad, `{"q": "c"}`)
			out, stderr, code := cli(t, "submit", wf, "--inputs", file, "--db", db)
			if code != 2 || !strings.Contains(stderr, file+tc.want) {
				t.Fatalf("submit exit %d, want 2 naming %s%s: %s", code, file, tc.want, stderr)
			}
			ids := strings.Fields(out)
			if len(ids) != 1 {
				t.Fatalf("submit printed %v, want the first line's run alone", ids)
			}
			var n int
			if err := openLog(t, db).SQL().Get(&n, `SELECT count(*) FROM runs`); err != nil || n != 1 {
				t.Fatalf("%d runs recorded (%v), want 1", n, err)
			}
		})
	}
	if _, stderr, code := cli(t, "submit", wf, "--inputs", "-", "--input", "q=a", "--db", filepath.Join(t.TempDir(), "b.db")); code != 2 || !strings.Contains(stderr, "does not combine with --input") {
		t.Fatalf("--inputs with --input: exit %d, want 2 (usage): %s", code, stderr)
	}
}
