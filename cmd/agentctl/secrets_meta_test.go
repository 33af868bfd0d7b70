package main

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// metaCanary reaches the server as the Authorization header; the server
// echoes it in every string of its initialize result and tools/list.
const metaCanary = "cnry-meta-4e7b0c2d91"

// metaWorkflow writes a workflow calling the leaky server's tool meta;
// extra is appended to its tasks.
func metaWorkflow(t *testing.T, url, name, extra string) string {
	t.Helper()
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: meta}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [META_TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s:
      url: %q
      timeoutSeconds: 10
      headers:
        authorization: {env: META_TOKEN}
  actions:
    call: {kind: mcp.call, idempotency: idempotent}
  tasks:
    - id: meta
      uses: action:call
      with: {server: s, tool: meta, arguments: {q: a}}
%s  outputs:
    v: "${{ tasks.meta.output.v }}"
`, url, extra)
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// noMetaCanary fails when the canary (or the token after "Bearer ") is in b.
func noMetaCanary(t *testing.T, what string, b []byte) {
	t.Helper()
	if i := bytes.Index(b, []byte(metaCanary)); i >= 0 {
		lo, hi := max(0, i-80), min(len(b), i+len(metaCanary)+40)
		t.Errorf("%s leaks the canary: …%q…", what, b[lo:hi])
	}
}

// TestCLI_SecretsInServerMetadataNeverLeak (issue 27 item 1): a server
// that echoes the Authorization value in every member of its initialize
// result (serverInfo and its icons, instructions, capabilities, _meta)
// and of its tools/list (a tool's title, description, schemas,
// annotations, execution, icons, _meta, and one tool's name) gets it into
// no byte agentctl writes: run --output json and jsonl, inspect --output
// json, the HTML report, audit export, check --remote (human and json,
// with findings quoting the tool's schema), replay, and the database
// file with its -wal and -shm. The run still succeeds: the tool is
// called, its arguments and output checked against the schemas as sent
// (its output is valid only against the outputSchema as sent, so replay
// and a resume after a crash conclude on the recorded verdict), and the
// recorded schema digest is the one computed on the tool as sent.
func TestCLI_SecretsInServerMetadataNeverLeak(t *testing.T) {
	init, tools := mcptest.LeakyMetadata("Authorization", metaCanary, "meta")
	srv := mcptest.Start(t, mcptest.Options{Initialize: init}, tools...)
	t.Setenv("META_TOKEN", "Bearer "+metaCanary)
	db := filepath.Join(t.TempDir(), "a.db")
	hold, err := sql.Open("sqlite3", "file:"+db+"?_journal_mode=WAL")
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Close()
	if _, err := hold.Exec("CREATE TABLE IF NOT EXISTS hold_open(x)"); err != nil {
		t.Fatal(err)
	}
	wf := metaWorkflow(t, srv.URL, "run", "")
	scan := func(what string, out, stderr string) {
		t.Helper()
		noMetaCanary(t, what+" stdout", []byte(out))
		noMetaCanary(t, what+" stderr", []byte(stderr))
	}

	var runID string
	for _, output := range []string{"jsonl", "json"} {
		out, stderr, code := cli(t, "run", wf, "--db", db, "--output", output)
		if code != 0 || !strings.Contains(out, transport.Redacted) {
			t.Fatalf("run --output %s: exit %d %s\n%s", output, code, stderr, out)
		}
		scan("run --output "+output, out, stderr)
		if output == "json" {
			runID = jsonRunID(t, out)
		}
	}
	if st := srv.Stats(); st.Calls["meta"] != 2 || st.Executed["meta"] != 2 {
		t.Fatalf("meta received %d, executed %d; want 2 and 2", st.Calls["meta"], st.Executed["meta"])
	}
	var sawSecret bool
	for _, r := range srv.Stats().Requests {
		sawSecret = sawSecret || r.Header.Get("Authorization") == "Bearer "+metaCanary
	}
	if !sawSecret {
		t.Fatal("the server never got the canary: the test shows nothing")
	}

	out, stderr, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
	scan("inspect --output json", out, stderr)
	if code != 0 || !strings.Contains(out, `"name": "`+transport.Redacted+`"`) {
		t.Fatalf("inspect: exit %d %s (serverInfo must show the redacted name)\n%s", code, stderr, out)
	}
	page := filepath.Join(t.TempDir(), "report.html")
	if _, stderr, code := cli(t, "inspect", runID, "--db", db, "--html", "-o", page); code != 0 {
		t.Fatalf("inspect --html: exit %d %s", code, stderr)
	}
	b, _ := os.ReadFile(page)
	noMetaCanary(t, "inspect --html", b)
	file := filepath.Join(t.TempDir(), "audit.jsonl")
	if _, stderr, code := cli(t, "audit", "export", runID, "-o", file, "--db", db); code != 0 {
		t.Fatalf("audit export: exit %d %s", code, stderr)
	}
	b, _ = os.ReadFile(file)
	noMetaCanary(t, "audit export", b)
	for _, want := range []string{`skipped: its name carries a secret value agentctl sent`, `catalogDigest`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the audit export has no %q", want)
		}
	}

	// replay concludes on the recorded verdict, and records the source's digest.
	out, stderr, code = cli(t, "replay", runID, "--db", db, "--output", "json")
	scan("replay", out, stderr)
	if code != 0 {
		t.Fatalf("replay: exit %d %s\n%s", code, stderr, out)
	}
	replayID := jsonRunID(t, out)
	src, rep := schemaDigests(t, db, runID), schemaDigests(t, db, replayID)
	if len(src) != 1 || strings.Join(src, ",") != strings.Join(rep, ",") {
		t.Fatalf("schema digests: source %v, replay %v", src, rep)
	}

	// check --remote: an unknown tool lists the tools, a bad argument
	// quotes the enum as sent.
	check := metaWorkflow(t, srv.URL, "check", `    - id: typo
      uses: action:call
      with: {server: s, tool: mta}
    - id: bad
      uses: action:call
      with: {server: s, tool: meta, arguments: {q: b}}
`)
	for _, output := range []string{"human", "json"} {
		out, stderr, code := cli(t, "check", "--remote", check, "--db", db, "--output", output)
		scan("check --remote --output "+output, out, stderr)
		if code != 2 || !strings.Contains(out+stderr, "unknown_tool") || !strings.Contains(out+stderr, "invalid_arguments") || !strings.Contains(out+stderr, transport.Redacted) {
			t.Fatalf("check --remote --output %s: exit %d\n%s\n%s", output, code, out, stderr)
		}
	}
	out, stderr, _ = cli(t, "mcp", "tools", srv.URL, "--allow-private", "--header", "Authorization=env:META_TOKEN")
	scan("mcp tools", out, stderr)

	files := dbFiles(t, db)
	if len(files["-wal"]) == 0 {
		t.Fatal("no WAL to inspect: the hold connection did not keep it")
	}
	for suffix, b := range files {
		noMetaCanary(t, "database file a.db"+suffix, b)
	}
	hold.Close()
	for suffix, b := range dbFiles(t, db) {
		noMetaCanary(t, "database file a.db"+suffix+" after checkpoint", b)
	}

	// Killed right after the result: resume concludes on the verdict recorded.
	killed := filepath.Join(t.TempDir(), "k.db")
	id := crashRun(t, killed, wf, "call.result#1")
	out, stderr, code = cli(t, "resume", id, "--db", killed, "--output", "json")
	scan("resume", out, stderr)
	if code != 0 || !strings.Contains(out, `"v": "`+transport.Redacted+`"`) {
		t.Fatalf("resume: exit %d %s\n%s", code, stderr, out)
	}
	for suffix, b := range dbFiles(t, killed) {
		noMetaCanary(t, "killed run k.db"+suffix, b)
	}
}

// schemaDigests lists the schema digests of a run's call.prepared events.
func schemaDigests(t *testing.T, db, runID string) []string {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT json_extract(payload, '$.schemaDigest') FROM events WHERE run_id = ? AND type = 'call.prepared' ORDER BY seq`, runID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}
