package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// The canaries: one reaches the server through {env}, one through {file}.
const (
	canaryEnv  = "cnry-env-7d1f0a9b3c"
	canaryFile = "cnry-file-52e8b6d4a1"
)

// secretServer is an MCP server that does its best to leak the headers it
// receives: in structured results, in text content, in log and progress
// notifications, in a JSON-RPC error message and in an isError result.
func secretServer(t *testing.T) *mcptest.Server {
	t.Helper()
	hdrs := func(c *mcptest.Call) string {
		return "auth=" + c.Header.Get("Authorization") + " key=" + c.Header.Get("X-Api-Key")
	}
	leak := mcptest.ToolDef{Name: "leak", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		_ = c.Notify("notifications/message", map[string]any{"level": "info", "data": hdrs(c)})
		_ = c.Progress(1, 2, hdrs(c))
		return &mcptest.Result{Content: mcptest.Text(hdrs(c)), StructuredContent: map[string]any{"h": hdrs(c), "args": string(c.Arguments)}}, nil
	}}
	rpcFail := mcptest.ToolDef{Name: "rpcfail", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		return nil, &mcptest.RPCError{Code: -32000, Message: "denied: " + hdrs(c)}
	}}
	toolFail := mcptest.ToolDef{Name: "toolfail", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		return nil, fmt.Errorf("tool failed: %s", hdrs(c))
	}}
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.EchoHeaders("echo"), leak, rpcFail, toolFail)
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusUnauthorized, Nth: 1}) // one credential refresh
	return srv
}

// secretWorkflow writes a workflow whose remote carries both canaries and
// whose last task calls last (echo/leak succeed; rpcfail/toolfail fail).
func secretWorkflow(t *testing.T, url, keyFile, last string) string {
	t.Helper()
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: secrets}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [CANARY_TOKEN]
    secretFileRoots: [%q]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s:
      url: %q
      timeoutSeconds: 10
      headers:
        authorization: {env: CANARY_TOKEN}
        x-api-key: {file: %q}
  actions:
    call: {kind: mcp.call, idempotency: idempotent}
  tasks:
    - id: echo
      uses: action:call
      with: {server: s, tool: echo}
    - id: leak
      uses: action:call
      with: {server: s, tool: leak, arguments: {a: "${{ tasks.echo.output.Authorization }}", k: "${{ tasks.echo.output.X-Api-Key }}"}}
    - id: last
      uses: action:call
      with: {server: s, tool: %s}
  outputs:
    headers: "${{ tasks.echo.output }}"
    leak: "${{ tasks.leak.output }}"
`, filepath.Dir(keyFile), url, keyFile, last)
	path := filepath.Join(t.TempDir(), "secrets-"+last+".yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noCanary fails when any canary appears in b.
func noCanary(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, c := range []string{canaryEnv, canaryFile} {
		if i := bytes.Index(b, []byte(c)); i >= 0 {
			lo, hi := max(0, i-80), min(len(b), i+len(c)+40)
			t.Errorf("%s leaks %s: …%q…", what, c, b[lo:hi])
		}
	}
}

// TestCLI_SecretsNeverLeak runs workflows whose remote gets both canaries
// (one 401 refresh included) and echoes them back everywhere it can. The
// canaries must appear in no byte agentctl writes: stdout and stderr in
// every output mode, error messages, inspect, runs list, replay, the audit
// export, and the database file with its WAL and shm, both while another
// connection keeps the WAL alive and after a SIGKILL mid-run (no checkpoint).
func TestCLI_SecretsNeverLeak(t *testing.T) {
	srv := secretServer(t)
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	if err := os.WriteFile(keyFile, []byte(canaryFile+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CANARY_TOKEN", "Bearer "+canaryEnv)
	db := filepath.Join(t.TempDir(), "a.db")
	// Keep the database open so that the WAL is neither checkpointed nor removed.
	hold, err := sql.Open("sqlite3", "file:"+db+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if _, err := hold.Exec("CREATE TABLE IF NOT EXISTS hold_open(x)"); err != nil {
		t.Fatal(err)
	}

	var runIDs []string
	for _, tc := range []struct {
		last, output string
		code         int
	}{
		{"echo", "json", 0},
		{"echo", "jsonl", 0},
		{"echo", "human", 0},
		{"rpcfail", "json", 4},
		{"rpcfail", "human", 4},
		{"toolfail", "jsonl", 4},
	} {
		wf := secretWorkflow(t, srv.URL, keyFile, tc.last)
		out, stderr, code := cli(t, "run", wf, "--db", db, "--output", tc.output)
		if code != tc.code {
			t.Fatalf("run %s (%s): exit %d, want %d; stderr %s", tc.last, tc.output, code, tc.code, stderr)
		}
		what := fmt.Sprintf("run %s --output %s", tc.last, tc.output)
		noCanary(t, what+" stdout", []byte(out))
		noCanary(t, what+" stderr", []byte(stderr))
		if strings.Contains(stderr, "panic") {
			t.Fatalf("%s: panic output %s", what, stderr)
		}
		if tc.code != 0 && !strings.Contains(stderr, transport.Redacted) {
			t.Errorf("%s: the error does not show the redaction marker: %s", what, stderr)
		}
		runIDs = append(runIDs, lastRunID(t, db))
	}
	// The server did get the real values, so the test is not vacuous.
	var sawEnv, sawFile bool
	for _, r := range srv.Stats().Requests {
		sawEnv = sawEnv || r.Header.Get("Authorization") == "Bearer "+canaryEnv
		sawFile = sawFile || r.Header.Get("X-Api-Key") == canaryFile
	}
	if !sawEnv || !sawFile {
		t.Fatalf("server saw the env canary %v, the file canary %v", sawEnv, sawFile)
	}
	if st := srv.Stats(); st.Calls["echo"] != st.Executed["echo"]+1 {
		t.Fatalf("echo received %d, executed %d: the 401 refresh did not happen once", st.Calls["echo"], st.Executed["echo"])
	}

	for _, id := range runIDs {
		for _, args := range [][]string{
			{"inspect", id, "--output", "json"},
			{"inspect", id},
			{"replay", id, "--output", "json"},
		} {
			out, stderr, _ := cli(t, append(args, "--db", db)...)
			noCanary(t, strings.Join(args, " ")+" stdout", []byte(out))
			noCanary(t, strings.Join(args, " ")+" stderr", []byte(stderr))
		}
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		if _, stderr, code := cli(t, "audit", "export", id, "-o", file, "--db", db); code != 0 {
			t.Fatalf("audit export %s: exit %d %s", id, code, stderr)
		}
		b, _ := os.ReadFile(file)
		noCanary(t, "audit export "+id, b)
	}
	out, stderr, _ := cli(t, "runs", "list", "--db", db, "--output", "json")
	noCanary(t, "runs list", []byte(out+stderr))

	files := dbFiles(t, db)
	if len(files["-wal"]) == 0 {
		t.Fatal("no WAL to inspect: the hold connection did not keep it")
	}
	all := bytes.Join([][]byte{files[""], files["-wal"], files["-shm"]}, nil)
	if !bytes.Contains(all, []byte(transport.Redacted)) {
		t.Fatal("the database holds no redaction marker: were the echoed headers recorded at all?")
	}
	for suffix, b := range files {
		noCanary(t, "database file a.db"+suffix, b)
	}
	hold.Close()
	for suffix, b := range dbFiles(t, db) {
		noCanary(t, "database file a.db"+suffix+" after checkpoint", b)
	}

	// A SIGKILL right after the leak task's result: the WAL is left as it was.
	killed := filepath.Join(t.TempDir(), "k.db")
	cmd := subprocess(t, "run", secretWorkflow(t, srv.URL, keyFile, "echo"), "--db", killed, "--output", "jsonl")
	cmd.Env = append(cmd.Env, "AGENTCTL_TEST_CRASH_AFTER=call.result#2")
	var sout, serr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &sout, &serr
	if err := cmd.Run(); err == nil {
		t.Fatalf("the crash hook did not fire: %s", serr.String())
	}
	noCanary(t, "killed run stdout", sout.Bytes())
	noCanary(t, "killed run stderr", serr.Bytes())
	files = dbFiles(t, killed)
	if len(files["-wal"]) == 0 {
		t.Fatal("the killed run left no WAL")
	}
	for suffix, b := range files {
		noCanary(t, "killed run k.db"+suffix, b)
	}
}

// dbFiles reads the database file and its -wal and -shm companions.
func dbFiles(t *testing.T, db string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(db + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out[suffix] = b
	}
	return out
}

// lastRunID returns the id of the run created last (ids are UUIDv7: time-ordered).
func lastRunID(t *testing.T, db string) string {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var payload string
	if err := raw.QueryRow(`SELECT payload FROM events WHERE seq = 1 AND run_id LIKE 'run-%' ORDER BY run_id DESC LIMIT 1`).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	var p struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(payload), &p); err != nil || p.RunID == "" {
		t.Fatalf("run.created payload %s: %v", payload, err)
	}
	return p.RunID
}
