package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
)

// TestCLI_ParallelExample runs examples/parallel.yaml (the example of
// README and docs/WORKFLOWS.md for concurrency, retry and continueOnError)
// against the demo server as printed, then queues it with submit and drains
// it with a worker: docs and draft start together, draft fails all three
// attempts of its retry policy, the run goes on with draft's output null,
// and fetch reads docs's output.
func TestCLI_ParallelExample(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{})
	src, err := os.ReadFile("../../examples/parallel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(t.TempDir(), "parallel.yaml")
	if err := os.WriteFile(wf, bytes.ReplaceAll(src, []byte("http://127.0.0.1:8765/mcp"), []byte(url)), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "a.db")
	check := func(runID string) {
		t.Helper()
		attempts := map[string][]string{}
		for _, r := range inspectTasks(t, db, runID) {
			id := r["taskId"].(string)
			attempts[id] = append(attempts[id], r["state"].(string))
		}
		want := map[string][]string{"docs": {"succeeded"}, "draft": {"failed", "failed", "failed"}, "fetch": {"succeeded"}}
		if b, w := mustJSON(t, attempts), mustJSON(t, want); b != w {
			t.Fatalf("task rows %s, want %s", b, w)
		}
	}
	out, stderr, code := cli(t, "run", wf, "--input", "query=raft", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	var env struct {
		Data struct {
			RunID   string         `json:"runId"`
			Outputs map[string]any `json:"outputs"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatal(err)
	}
	if v, ok := env.Data.Outputs["draft"]; !ok || v != nil || env.Data.Outputs["title"] == "" {
		t.Fatalf("outputs %v, want draft null and a title", env.Data.Outputs)
	}
	check(env.Data.RunID)

	id, stderr, code := cli(t, "submit", wf, "--input", "query=sqlite", "--db", db)
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, stderr)
	}
	if _, stderr, code := cli(t, "worker", "--drain", "--db", db); code != 0 {
		t.Fatalf("worker exit %d: %s", code, stderr)
	}
	check(string(bytes.TrimSpace([]byte(id))))
	if n := srv.Calls("get"); n != 2*(3+1) {
		t.Fatalf("the demo server saw %d get calls, want 8 (3 draft attempts and 1 fetch, twice)", n)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
