package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// The old databases under testdata/olddb were written by the release
// before the typed log (base commit 38c923f) through its real CLI and real
// servers; TestCLI_OldDatabase proves every later release still reads,
// verifies, replays, exports and resumes them. TestGenerateOldDB is how
// they were made: run it only at that commit (see testdata/olddb/README.md).

// oldDBPeer is the name, resolved on PATH, of the stdio server of the
// unfinished run: a test puts a link to its own binary (a demo stdio
// peer, see demotest.StdioPeer) under this name on PATH to resume it.
const oldDBPeer = "agentctl-olddb-peer"

// oldDBCallsVar is the variable (a secret reference of the peer's
// environment) naming the file where the peer counts tool executions.
const oldDBCallsVar = "OLDDB_PEER_CALLS"

// oldDBKey is the payload key of the sealed old database: a test key, not
// a secret (32 bytes, base64).
const oldDBKey = "b2xkLWRhdGFiYXNlLXRlc3Qta2V5LW5vdC1hLXNlY3I="

// oldDBManifest is what the generator knew of each run, for the test.
type oldDBManifest struct {
	Runs []oldDBRun `json:"runs"`
}

type oldDBRun struct {
	Name     string `json:"name"`
	RunID    string `json:"runId"`
	Exit     int    `json:"exit"`     // the exit code of the run's last command (run or resume)
	State    string `json:"state"`    // runs list state
	ReplayOf string `json:"replayOf"` // for a replay: the run it replays
	// Unfinished runs end in a crash; the test resumes them.
	Unfinished bool `json:"unfinished,omitempty"`
}

// peerOnPath makes a directory holding oldDBPeer (a link to this test
// binary) and returns a PATH with it first.
func peerOnPath(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(os.Args[0], filepath.Join(dir, oldDBPeer)); err != nil {
		t.Fatal(err)
	}
	return dir + string(os.PathListSeparator) + os.Getenv("PATH")
}

const oldDBParallel = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: old-parallel }
spec:
  concurrency: 4
  policy:
    networkAllowlist: [127.0.0.1]
    network: { allowedSchemes: [http], allowPrivate: true }
  mcpServers:
    local: { url: URL, timeoutSeconds: 30 }
  actions:
    lookup:
      kind: mcp.call
      idempotency: idempotent
      retry: { maxAttempts: 3, initialIntervalSeconds: 0.1, backoffFactor: 2, maxIntervalSeconds: 1 }
  tasks:
    - id: docs
      uses: action:lookup
      needs: []
      with: { server: local, tool: search, arguments: { q: "raft" } }
    - id: draft
      uses: action:lookup
      needs: []
      continueOnError: true
      with: { server: local, tool: get, arguments: { id: no-such-document } }
    - id: fetch
      uses: action:lookup
      needs: [docs, draft]
      with: { server: local, tool: get, arguments: { id: "${{ tasks.docs.output.id }}" } }
  outputs:
    title: "${{ tasks.fetch.output.title }}"
    draft: "${{ tasks.draft.output }}"
`

const oldDBOnce = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: old-at-most-once }
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: { allowedSchemes: [http], allowPrivate: true }
  mcpServers:
    local: { url: URL, timeoutSeconds: 30 }
  actions:
    pay: { kind: mcp.call, idempotency: at_most_once }
  tasks:
    - id: only
      uses: action:pay
      with: { server: local, tool: act, arguments: { n: 1 } }
  outputs:
    result: "${{ tasks.only.output }}"
`

const oldDBTask = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: old-task }
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: { allowedSchemes: [http], allowPrivate: true }
  mcpServers:
    local: { url: URL, timeoutSeconds: 30 }
  actions:
    research: { kind: mcp.call, idempotency: idempotent }
  tasks:
    - id: only
      uses: action:research
      with: { server: local, tool: research, arguments: { n: 1 } }
  outputs:
    result: "${{ tasks.only.output }}"
`

// oldDBUnfinished calls the stdio demo peer twice: first at most once,
// then idempotently. The generator kills the run after the first task
// finished; the second call may have been sent by then, and may be sent
// again on resume (it is idempotent); the first must never be.
const oldDBUnfinished = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: old-unfinished }
spec:
  policy:
    commandAllowlist: [` + oldDBPeer + `]
    environmentAllowlist: [` + oldDBCallsVar + `]
  mcpServers:
    local:
      command: [` + oldDBPeer + `]
      env: { ` + demotest.PeerEnv + `: demo, ` + demotest.CallsEnv + `: { env: ` + oldDBCallsVar + ` } }
      timeoutSeconds: 30
      shutdownGraceSeconds: 1
  actions:
    once: { kind: mcp.call, idempotency: at_most_once }
    again: { kind: mcp.call, idempotency: idempotent }
  tasks:
    - id: first
      uses: action:once
      with: { server: local, tool: search, arguments: { q: "raft" } }
    - id: second
      uses: action:again
      with: { server: local, tool: get, arguments: { id: "${{ tasks.first.output.id }}" } }
  outputs:
    title: "${{ tasks.second.output.title }}"
`

func writeOldWorkflow(t *testing.T, name, src, url string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(p, []byte(strings.ReplaceAll(src, "URL", url)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestGenerateOldDB writes testdata/olddb/{plain,sealed}.db and their
// manifests. It runs only with AGENTCTL_GEN_OLDDB=1, at the base commit.
func TestGenerateOldDB(t *testing.T) {
	if os.Getenv("AGENTCTL_GEN_OLDDB") == "" {
		t.Skip("generator: set AGENTCTL_GEN_OLDDB=1, at the base commit only (testdata/olddb/README.md)")
	}
	for _, name := range []string{"plain", "sealed"} {
		t.Run(name, func(t *testing.T) { generateOldDB(t, name) })
	}
}

func generateOldDB(t *testing.T, name string) {
	db := filepath.Join(t.TempDir(), name+".db")
	if name == "sealed" {
		t.Setenv("OLDDB_KEY", oldDBKey)
		if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "OLDDB_KEY", "--db", db); code != 0 {
			t.Fatalf("enable encryption exit %d: %s", code, stderr)
		}
		t.Setenv("AGENTCTL_KEY_K1", oldDBKey)
	}
	var m oldDBManifest
	runCLI := func(want int, args ...string) string {
		t.Helper()
		out, stderr, code := cli(t, append(args, "--db", db, "--output", "json")...)
		if code != want {
			t.Fatalf("%v: exit %d, want %d: %s", args, code, want, stderr)
		}
		return out
	}

	// 1. Parallel, retries, continueOnError, against the go-sdk demo server.
	_, demoURL := demotest.StartTest(t, demoserver.Options{})
	out := runCLI(0, "run", writeOldWorkflow(t, "parallel", oldDBParallel, demoURL))
	m.Runs = append(m.Runs, oldDBRun{Name: "parallel", RunID: jsonRunID(t, out), Exit: 0, State: "succeeded"})

	// 2. An at_most_once call left uncertain (session lost after the send),
	// reconciled as applied, then resumed.
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
	out = runCLI(3, "run", writeOldWorkflow(t, "once", oldDBOnce, srv.URL))
	onceID := jsonRunID(t, out)
	effects := listEffects(t, db, onceID)
	if len(effects) != 1 || effects[0]["status"] != "uncertain" {
		t.Fatalf("effects = %v", effects)
	}
	if _, stderr, code := cli(t, "effects", "reconcile", effects[0]["effectId"].(string), "--db", db, "--status", "applied",
		"--reason", "order 17 exists", "--result-file", writeFile(t, `{"done": true}`)); code != 0 {
		t.Fatalf("reconcile: exit %d: %s", code, stderr)
	}
	runCLI(0, "resume", onceID)
	if st := srv.Stats(); st.Calls["act"] != 1 {
		t.Fatalf("server saw %d calls of act, want 1", st.Calls["act"])
	}
	m.Runs = append(m.Runs, oldDBRun{Name: "at-most-once", RunID: onceID, Exit: 0, State: "succeeded"})

	// 3. An MCP task call (task-augmented tools/call, polled to its result).
	tsrv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1}}, researchTool())
	out = runCLI(0, "run", writeOldWorkflow(t, "task", oldDBTask, tsrv.URL))
	taskID := jsonRunID(t, out)
	m.Runs = append(m.Runs, oldDBRun{Name: "task", RunID: taskID, Exit: 0, State: "succeeded"})

	// 3b. A server whose JSON carries whitespace, keys out of order and
	// escapes: this release kept its info as received in server_info,
	// which its own inspect --verify then refused (issue 28 item 4).
	spacedURL, _ := spacedHTTP(t)
	spaced := `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: { name: old-spaced }
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: { allowedSchemes: [http], allowPrivate: true }
  mcpServers:
    local: { url: URL, timeoutSeconds: 30 }
  actions:
    echo: { kind: mcp.call, idempotency: idempotent }
  tasks:
    - id: one
      uses: action:echo
      with: { server: local, tool: echo, arguments: { q: "caf\u00e9" } }
  outputs:
    z: "${{ tasks.one.output.z }}"
`
	out = runCLI(0, "run", writeOldWorkflow(t, "spaced", spaced, spacedURL))
	m.Runs = append(m.Runs, oldDBRun{Name: "spaced", RunID: jsonRunID(t, out), Exit: 0, State: "succeeded"})

	// 4. A replay of the parallel run.
	out = runCLI(0, "replay", m.Runs[0].RunID)
	m.Runs = append(m.Runs, oldDBRun{Name: "replay", RunID: jsonRunID(t, out), Exit: 0, State: "succeeded", ReplayOf: m.Runs[0].RunID})

	// 5. An unfinished run: killed right after its first task finished.
	path := peerOnPath(t)
	t.Setenv("PATH", path)
	calls := filepath.Join(t.TempDir(), "calls")
	t.Setenv(oldDBCallsVar, calls)
	before := map[string]bool{}
	for _, id := range runIDs(t, db) {
		before[id] = true
	}
	cmd := subprocess(t, "run", writeOldWorkflow(t, "unfinished", oldDBUnfinished, ""), "--db", db, "--output", "json")
	cmd.Env = append(cmd.Env, "AGENTCTL_TEST_CRASH_AFTER=task.finished#1")
	outb, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("unfinished run did not die: %v\n%s", err, outb)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("unfinished run ended with %v, not SIGKILL\n%s", err, outb)
	}
	awaitDeadOwners(t, db)
	var unfinished string
	for _, id := range runIDs(t, db) {
		if !before[id] {
			unfinished = id
		}
	}
	if b, _ := os.ReadFile(calls); len(strings.Fields(string(b))) != 2 || strings.Fields(string(b))[0] != "search" {
		t.Fatalf("peer executions before the crash: %q, want one search", b)
	}
	m.Runs = append(m.Runs, oldDBRun{Name: "unfinished", RunID: unfinished, Exit: 0, State: "running", Unfinished: true})

	for _, r := range m.Runs {
		if r.RunID == "" {
			t.Fatalf("run %s has no id", r.Name)
		}
	}
	for _, r := range m.Runs {
		saveOldDBViews(t, db, filepath.Join("testdata", "olddb", name), r.Name, r.RunID)
	}
	saveOldDB(t, db, name, m)
}

// saveOldDB vacuums db into testdata/olddb/NAME.db and writes the manifest.
func saveOldDB(t *testing.T, db, name string, m oldDBManifest) {
	t.Helper()
	dir := filepath.Join("testdata", "olddb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name+".db")
	_ = os.Remove(dst)
	raw, err := sql.Open("sqlite3", "file:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`VACUUM INTO ?`, dst); err != nil {
		t.Fatalf("vacuum into %s: %v", dst, err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
