package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// hostileText carries every way a server can reach a terminal through a
// string: SGR colour, OSC 0 (window title), OSC 52 (clipboard write), clear
// screen, BEL, C1 CSI and a bidi override with its pop.
const hostileText = "boom \x1b[31mred \x1b]0;owned\x07 \x1b]52;c;ZXZpbA==\x07 \x1b[2J \a \u009b31m \u202Eevil\u202C"

// unsafeOnTerminal matches what must never reach a human's terminal.
var unsafeOnTerminal = regexp.MustCompile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")

// TestCLI_TerminalEscapesNeutralised: a JSON-RPC error message and an
// isError result full of terminal escapes reach stderr only as inert text,
// from run, replay and mcp call; the JSON output keeps them as data.
func TestCLI_TerminalEscapesNeutralised(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{},
		mcptest.ToolDef{Name: "rpcerr", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, &mcptest.RPCError{Code: -32000, Message: hostileText}
		}},
		mcptest.ToolDef{Name: "iserr", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{IsError: true, Content: mcptest.Text(hostileText)}, nil
		}},
	)
	db := filepath.Join(t.TempDir(), "a.db")
	check := func(what, stderr string) {
		t.Helper()
		if !strings.Contains(stderr, "boom") {
			t.Fatalf("%s: stderr does not carry the server's message: %q", what, stderr)
		}
		if loc := unsafeOnTerminal.FindStringIndex(stderr); loc != nil {
			t.Fatalf("%s: stderr carries %q at %d: %q", what, stderr[loc[0]:loc[1]], loc[0], stderr)
		}
	}
	for _, tool := range []string{"rpcerr", "iserr"} {
		_, stderr, code := cli(t, "run", hostileWorkflow(t, srv.URL, tool, "at_most_once", 5, 0), "--db", db)
		if code != 4 {
			t.Fatalf("run %s: exit %d, want 4: %s", tool, code, stderr)
		}
		check("run "+tool, stderr)
		runID := regexp.MustCompile(`run-[0-9a-f-]{36}`).FindString(stderr)
		if runID == "" {
			t.Fatalf("run %s: no run id in %q", tool, stderr)
		}
		_, stderr, code = cli(t, "replay", runID, "--db", db)
		if code != 4 {
			t.Fatalf("replay %s: exit %d, want 4: %s", tool, code, stderr)
		}
		check("replay "+tool, stderr)
		_, stderr, code = cli(t, "mcp", "call", srv.URL, tool, "--allow-private", "--db", db)
		if code != 4 {
			t.Fatalf("mcp call %s: exit %d, want 4: %s", tool, code, stderr)
		}
		check("mcp call "+tool, stderr)
	}
	// JSON keeps the data as data: the escape is there, escaped by JSON.
	_, stderr, _ := cli(t, "run", hostileWorkflow(t, srv.URL, "rpcerr", "at_most_once", 5, 0), "--db", db, "--output", "json")
	if !strings.Contains(stderr, `\u001b[31mred`) {
		t.Fatalf("json error lost the data: %s", stderr)
	}
}

// TestCLI_PolicyRefusalOneExitCode: the same loopback refusal exits 3 (a
// policy refusal) from run FILE, check FILE, mcp tools and mcp call, and
// writes nothing.
func TestCLI_PolicyRefusalOneExitCode(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "a"})
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	wf := filepath.Join(dir, "lb.yaml")
	src := `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: lb}
spec:
  policy:
    network: {allowedSchemes: [http]}
  mcpServers:
    s: {url: "` + srv.URL + `"}
  actions:
    a: {kind: mcp.call}
  tasks:
    - id: t
      uses: action:a
      with: {server: s, tool: a}
`
	if err := os.WriteFile(wf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", wf, "--db", db},
		{"check", wf},
		{"mcp", "tools", srv.URL, "--db", db},
		{"mcp", "call", srv.URL, "a", "--db", db},
	} {
		_, stderr, code := cli(t, args...)
		if code != 3 || !strings.Contains(stderr, "loopback") {
			t.Errorf("%v: exit %d, want 3 naming the loopback refusal: %s", args[:2], code, stderr)
		}
	}
	if st := srv.Stats(); st.Posts+st.Gets+st.Deletes != 0 {
		t.Fatalf("server saw requests: %+v", st)
	}
	if _, err := os.Stat(db); err == nil {
		t.Fatalf("a refused command created the database")
	}
}

// TestCLI_SessionIDNeverInErrors: a server that quotes the session id in
// its error message gets it into no stored or printed error: runs.error,
// inspect, stderr show the message without the id.
func TestCLI_SessionIDNeverInErrors(t *testing.T) {
	var sid string
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "q", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		sid = c.Session
		return nil, &mcptest.RPCError{Code: -32000, Message: "no such session " + c.Session + " here"}
	}})
	db := filepath.Join(t.TempDir(), "a.db")
	_, stderr, code := cli(t, "run", hostileWorkflow(t, srv.URL, "q", "at_most_once", 5, 0), "--db", db)
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s", code, stderr)
	}
	if len(sid) < 8 {
		t.Fatalf("mcptest session id %q too short for this test", sid)
	}
	out, _, _ := cli(t, "inspect", "last", "--db", db, "--output", "json")
	for what, text := range map[string]string{"stderr": stderr, "inspect": out} {
		if strings.Contains(text, sid) {
			t.Errorf("%s quotes the session id %q: %s", what, sid, text)
		}
		if !strings.Contains(text, "no such session") {
			t.Errorf("%s lost the server's message: %s", what, text)
		}
	}
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(db + "-wal")
	if strings.Contains(string(raw)+string(wal), sid) {
		t.Errorf("the database holds the session id in clear")
	}
}
