package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/migrations"
)

// cli runs agentctl in-process and returns stdout, stderr and the exit code.
func cli(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// jsonRunID is the run id of the envelope a --output json command printed
// ({"data":{"runId":...}}), so that every test reads it one way; it fails the
// test with the output when that does not decode or names no run.
func jsonRunID(t testing.TB, out string) string {
	t.Helper()
	id, err := decodeRunID(out)
	if err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	return id
}

// decodeRunID is jsonRunID's decoding, for the callers that fall back to
// another source when stdout holds no run id.
func decodeRunID(out string) (string, error) {
	var env struct {
		Data struct {
			RunID string `json:"runId"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		return "", fmt.Errorf("output is not one JSON envelope: %w", err)
	}
	if env.Data.RunID == "" {
		return "", fmt.Errorf("JSON envelope has no data.runId")
	}
	return env.Data.RunID, nil
}

func writeWorkflow(t *testing.T, url string) string {
	t.Helper()
	src, err := os.ReadFile("../../examples/lookup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	src = bytes.ReplaceAll(src, []byte("http://127.0.0.1:8765/mcp"), []byte(url))
	path := filepath.Join(t.TempDir(), "lookup.yaml")
	if err := os.WriteFile(path, src, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCLI_RunThenInspectJSON(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testRunThenInspectJSON(t, b.DSN(t)) })
}

func testRunThenInspectJSON(t *testing.T, db string) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	wf := writeWorkflow(t, url)
	out, stderr, code := cli(t, "run", wf, "--input", "query=event sourcing", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	var env struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		OK         bool   `json:"ok"`
		Data       struct {
			RunID   string         `json:"runId"`
			State   string         `json:"state"`
			Outputs map[string]any `json:"outputs"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("stdout is not one JSON envelope: %v\n%s", err, out)
	}
	if env.APIVersion != "agentctl.dev/cli/v1" || env.Kind != "RunResult" || !env.OK || env.Data.State != "succeeded" {
		t.Fatalf("envelope = %+v", env)
	}
	if env.Data.Outputs["title"] != "Document "+demoserver.DocID("event sourcing") {
		t.Fatalf("outputs = %v", env.Data.Outputs)
	}
	out, stderr, code = cli(t, "inspect", env.Data.RunID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect exit %d: %s", code, stderr)
	}
	var ins struct {
		Kind string                     `json:"kind"`
		Data map[string]json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &ins); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run", "tasks", "protocolSessions", "protocolCalls", "streamEvents"} {
		if _, ok := ins.Data[k]; !ok {
			t.Errorf("inspect data lacks %q", k)
		}
	}
}

// TestCLI_BadWorkflowCreatesNoRun: a workflow that does not load is
// refused (exit 2, file:line) before anything is written. On SQLite and
// PostgreSQL.
func TestCLI_BadWorkflowCreatesNoRun(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testBadWorkflowCreatesNoRun(t, b.DSN(t)) })
}

func testBadWorkflowCreatesNoRun(t *testing.T, db string) {
	dir := t.TempDir()
	// A database with one good run, to compare byte for byte (row for row
	// on PostgreSQL).
	_, url := demotest.StartTest(t, demoserver.Options{})
	if _, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db); code != 0 {
		t.Fatalf("seed run: %s", stderr)
	}
	before := dbSnapshot(t, db)
	cases := map[string]string{
		"unknown-key.yaml": "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: x}\nspec:\n  bogus: 1\n  tasks: []\n",
		"missing-server.yaml": `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: x}
spec:
  actions: {a: {kind: mcp.call}}
  tasks:
    - id: t
      uses: action:a
      with: {server: nowhere, tool: echo}
`,
		"bad-template.yaml": `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: x}
spec:
  policy: {network: {allowedSchemes: [http], allowPrivate: true}}
  mcpServers: {s: {url: "http://127.0.0.1:1/mcp"}}
  actions: {a: {kind: mcp.call}}
  tasks:
    - id: t
      uses: action:a
      with: {server: s, tool: echo, arguments: {m: "${{ tasks.nope.output.x }}"}}
`,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name)
			if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
				t.Fatal(err)
			}
			_, stderr, code := cli(t, "run", path, "--db", db)
			if code != 2 {
				t.Fatalf("exit %d, want 2; stderr: %s", code, stderr)
			}
			if !strings.Contains(stderr, path+":") {
				t.Fatalf("error does not name file:line: %s", stderr)
			}
			if dbSnapshot(t, db) != before {
				t.Fatal("database changed")
			}
		})
	}
}

func TestCLI_UnknownRunIsExit2(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	_, url := demotest.StartTest(t, demoserver.Options{})
	if _, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db); code != 0 {
		t.Fatalf("seed run: %s", stderr)
	}
	_, stderr, code := cli(t, "inspect", "run-nope", "--db", db, "--output", "json")
	if code != 2 || !strings.Contains(stderr, "run-nope") || !strings.Contains(stderr, `"kind":"Error"`) {
		t.Fatalf("exit %d stderr %s", code, stderr)
	}
}

func TestCLI_NewerSchemaRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	newer := migrations.Latest + 1
	if _, err := raw.Exec(fmt.Sprintf("CREATE TABLE x(a); PRAGMA user_version = %d", newer)); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	before, _ := os.ReadFile(db)
	_, url := demotest.StartTest(t, demoserver.Options{})
	_, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db)
	if code != 5 || !strings.Contains(stderr, fmt.Sprintf("version %d", newer)) {
		t.Fatalf("exit %d, want 5; stderr %s", code, stderr)
	}
	after, _ := os.ReadFile(db)
	if !bytes.Equal(before, after) {
		t.Fatal("database changed")
	}
}
