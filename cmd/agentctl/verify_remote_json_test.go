package main

import (
	"bufio"
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
)

// spacedPeerEnv, in a stdio server's environment, makes this test binary
// the spaced peer over stdio; its value is the file counting tools/call.
const spacedPeerEnv = "AGENTCTL_SPACED_PEER"

func init() {
	if f := os.Getenv(spacedPeerEnv); f != "" {
		os.Exit(spacedStdio(f))
	}
}

// The spaced peer's results, as raw bytes: whitespace around every token,
// keys out of order, escapes (\u00e9, \/, \n, \t) and HTML characters in
// strings, nested objects and arrays: what a server not written in Go
// sends, and what no re-encoding reproduces.
const (
	spacedServerInfo = `{ "version" : "1.0 \u00e9\n" ,	"name":"spaced\/srv <b>&amp;",  "zeta": [ 1, 2 ,3 ], "alpha" : {"b" : 1 , "a" : "x\ty"} }`
	spacedInit       = `{ "serverInfo" : ` + spacedServerInfo + ` , "protocolVersion" : "2025-11-25", "capabilities" : { "tools" : { } } }`
	spacedTools      = `{ "tools" : [ { "inputSchema" : { "type" : "object", "properties" : { "q" : { "type" : "string", "description" : "caf\u00e9 \/ <q>" } } }, "name" : "echo", "description" : "says it \u00e9 back\n" } ] }`
	spacedResult     = `{ "structuredContent" : { "z" : "\u00e9\/\n", "a" : [ 1 , { "y" : true , "x" : null } ] }, "content" : [ { "text" : "caf\u00e9 \/ done\n", "type" : "text" } ], "isError" : false }`
)

// spacedAnswer is the peer's answer to one JSON-RPC message, nil for a
// notification; calls counts tools/call.
func spacedAnswer(msg []byte, calls func()) []byte {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || m.ID == nil {
		return nil
	}
	var result string
	switch m.Method {
	case "initialize":
		result = spacedInit
	case "tools/list":
		result = spacedTools
	case "tools/call":
		calls()
		result = spacedResult
	case "ping":
		result = `{ }`
	default:
		return []byte(fmt.Sprintf(`{ "error" : { "message" : "no method \u00e9", "code" : -32601 }, "jsonrpc" : "2.0", "id" : %s }`, m.ID))
	}
	return []byte(fmt.Sprintf(`{ "result" : %s ,  "jsonrpc" : "2.0", "id" : %s }`, result, m.ID))
}

// spacedHTTP is the spaced peer over Streamable HTTP (JSON responses), on
// loopback; it returns its URL and the number of tools/call it ran.
func spacedHTTP(t *testing.T) (string, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		out := spacedAnswer(body, func() { calls.Add(1) })
		if out == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Mcp-Session-Id", "spaced-session-1")
		// Over HTTP the body may span lines.
		_, _ = w.Write(bytes.ReplaceAll(out, []byte(", "), []byte(",\n  ")))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp", &calls
}

// spacedStdio serves the spaced peer on stdin/stdout, one message a line,
// appending a line to callsFile for each tools/call.
func spacedStdio(callsFile string) int {
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		out := spacedAnswer(in.Bytes(), func() {
			f, err := os.OpenFile(callsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err == nil {
				_, _ = f.WriteString("call\n")
				_ = f.Close()
			}
		})
		if out != nil {
			if _, err := os.Stdout.Write(append(out, '\n')); err != nil {
				return 1
			}
		}
	}
	return 0
}

// TestCLI_VerifyRemoteJSONAsSent (issue 28 item 4): a run against a
// server whose JSON carries whitespace, keys out of order and escapes
// verifies (inspect --verify, exit 0): the live projection and a rebuild
// from the log compute the same row, byte for byte, for every column that
// holds remote JSON (protocol_sessions.server_info). Over HTTP and stdio,
// on SQLite and PostgreSQL; the tool ran once.
func TestCLI_VerifyRemoteJSONAsSent(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, tr := range []string{"http", "stdio"} {
			t.Run(tr, func(t *testing.T) {
				db := b.DSN(t)
				w := testkit.Workflow{Name: "spaced",
					Tasks: []testkit.Task{
						{ID: "one", Action: "act", Idempotency: "idempotent", Tool: "echo", Arguments: `{q: "caf\u00e9"}`},
						{ID: "two", Action: "act", Idempotency: "idempotent", Tool: "echo", Arguments: `{q: "x"}`, Keys: []string{"needs: [one]"}},
					},
					Outputs: []testkit.Output{{Name: "z", Value: "${{ tasks.two.output.z }}"}}}
				var executions func() int
				if tr == "http" {
					url, calls := spacedHTTP(t)
					w.URL = url
					executions = func() int { return int(calls.Load()) }
				} else {
					callsFile := filepath.Join(t.TempDir(), "calls")
					w.Command = []string{os.Args[0]}
					w.ServerKeys = []string{fmt.Sprintf("env: {%s: %q}", spacedPeerEnv, callsFile)}
					executions = func() int {
						b, _ := os.ReadFile(callsFile)
						return strings.Count(string(b), "call\n")
					}
				}
				out, stderr, code := cli(t, "run", w.WriteFile(t), "--db", db, "--output", "json")
				if code != 0 {
					t.Fatalf("run: exit %d: %s", code, stderr)
				}
				runID := jsonRunID(t, out)
				if n := executions(); n != 2 {
					t.Fatalf("server ran %d calls, want 2", n)
				}
				v, stderr, code := inspectJSON(t, runID, "--db", db, "--verify")
				if code != 0 || v.Data.ProjectionVerified == nil || !*v.Data.ProjectionVerified {
					t.Fatalf("inspect --verify: exit %d %s %+v", code, stderr, v.Data)
				}
				// inspect shows the server's info as the log holds it.
				out, _, _ = cli(t, "inspect", runID, "--db", db, "--output", "json")
				var doc struct {
					Data struct {
						ProtocolSessions []struct {
							ServerInfo json.RawMessage `json:"serverInfo"`
						} `json:"protocolSessions"`
					} `json:"data"`
				}
				if err := json.Unmarshal([]byte(out), &doc); err != nil || len(doc.Data.ProtocolSessions) == 0 {
					t.Fatalf("inspect json: %v: %s", err, out)
				}
				var want bytes.Buffer
				_ = json.Compact(&want, []byte(spacedServerInfo))
				var got bytes.Buffer
				_ = json.Compact(&got, doc.Data.ProtocolSessions[0].ServerInfo)
				if got.String() != want.String() {
					t.Fatalf("serverInfo = %s, want %s", got.String(), want.String())
				}
			})
		}
	})
}

// TestCLI_MigrationRecompactsServerInfo (issue 28 item 4): a database the
// previous release wrote against a spaced server holds server_info as the
// server sent it; the upgrade (sqlite 0016, postgres 0005) rewrites it to
// what a rebuild from the log computes, so inspect --verify passes.
func TestCLI_MigrationRecompactsServerInfo(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		db := b.DSN(t)
		url, _ := spacedHTTP(t)
		w := testkit.Workflow{Name: "spaced", URL: url,
			Tasks: []testkit.Task{{ID: "one", Action: "act", Idempotency: "idempotent", Tool: "echo", Arguments: `{q: "x"}`}}}
		out, stderr, code := cli(t, "run", w.WriteFile(t), "--db", db, "--output", "json")
		if code != 0 {
			t.Fatalf("run: exit %d: %s", code, stderr)
		}
		runID := jsonRunID(t, out)
		// The database as the previous release left it: the row as
		// received, the schema back at that release's version (15 on
		// SQLite, 4 on PostgreSQL), without the tables later migrations add
		// and with the runs columns they drop.
		const counters = `; ALTER TABLE runs ADD COLUMN calls INTEGER NOT NULL DEFAULT 0; ALTER TABLE runs ADD COLUMN events INTEGER NOT NULL DEFAULT 0; ALTER TABLE runs ADD COLUMN last_seq INTEGER NOT NULL DEFAULT 0`
		driver, update, back := "sqlite3", `UPDATE protocol_sessions SET server_info = ? WHERE run_id = ?`, `DROP TABLE credentials; PRAGMA user_version = 15`+counters
		if b.Name == "postgres" {
			driver, update, back = "pgx", `UPDATE protocol_sessions SET server_info = $1 WHERE run_id = $2`, `DROP TABLE credentials; DELETE FROM agentctl_schema WHERE version >= 5`+counters
		}
		raw, err := sql.Open(driver, db)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := raw.Exec(update, spacedServerInfo, runID); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%d protocol_sessions rows", n)
		}
		if _, err := raw.Exec(back); err != nil {
			t.Fatal(err)
		}
		_ = raw.Close()
		if _, stderr, code := cli(t, "db", "migrate", "--db", db); code != 0 {
			t.Fatalf("db migrate: exit %d: %s", code, stderr)
		}
		if v, stderr, code := inspectJSON(t, runID, "--db", db, "--verify"); code != 0 || v.Data.ProjectionVerified == nil || !*v.Data.ProjectionVerified {
			t.Fatalf("inspect --verify after the upgrade: exit %d %s", code, stderr)
		}
	})
}
