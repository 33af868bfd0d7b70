package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_OutcomeDecidedAsReceived (issue 13 item 3): a server echoing the
// credential in structuredContent, with an outputSchema that constrains
// that string, had its call validated on the redacted copy: "'[REDACTED]'
// does not match pattern" failed a call that executed and whose result was
// valid as received. The outcome is decided on the value as received, the
// verdict is recorded, a replay reaches the same outcome, and a violation's
// message (which quotes the value) is redacted like everything else.
func TestCLI_OutcomeDecidedAsReceived(t *testing.T) {
	whoami := func(name, pattern string) mcptest.ToolDef {
		return mcptest.ToolDef{Name: name,
			OutputSchema: json.RawMessage(`{"type":"object","properties":{"auth":{"type":"string","pattern":"` + pattern + `"}},"required":["auth"]}`),
			Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
				b, _ := json.Marshal(map[string]string{"auth": c.Header.Get("Authorization")})
				return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: json.RawMessage(b)}, nil
			}}
	}
	srv := mcptest.Start(t, mcptest.Options{}, whoami("bearer", "^Bearer "), whoami("basic", "^Basic "))
	t.Setenv("MCP_TOKEN", kanaryToken)
	db := filepath.Join(t.TempDir(), "a.db")
	for _, tc := range []struct {
		tool string
		code int
	}{{"bearer", 0}, {"basic", 3}} { // at_most_once: a result its schema refuses leaves the call uncertain
		path := tokenWorkflow(t, "whoami", srv.URL, tc.tool, "")
		out, stderr, code := cli(t, "run", path, "--db", db)
		if code != tc.code {
			t.Fatalf("run %s: exit %d, want %d (decided on the value as received): %s", tc.tool, code, tc.code, stderr)
		}
		if tc.code != 0 && !strings.Contains(stderr, "does not match pattern") {
			t.Fatalf("run %s: the violation is not reported: %s", tc.tool, stderr)
		}
		if p := leakedPrefix(out + stderr); p != "" {
			t.Fatalf("run %s leaks %q: %s", tc.tool, p, stderr)
		}
		runID := lastRunID(t, db)
		_, rstderr, rcode := cli(t, "replay", runID, "--db", db)
		if rcode != tc.code {
			t.Fatalf("replay of %s: exit %d, want the source's %d: %s", tc.tool, rcode, tc.code, rstderr)
		}
		if p := leakedPrefix(rstderr); p != "" {
			t.Fatalf("replay of %s leaks %q", tc.tool, p)
		}
		if got := srv.Stats().Calls[tc.tool]; got != 1 {
			t.Fatalf("%s: server saw %d calls, want 1", tc.tool, got)
		}
	}
	marked := false
	for suffix, b := range dbFiles(t, db) {
		if p := leakedPrefix(string(b)); p != "" {
			t.Errorf("database a.db%s leaks %q", suffix, p)
		}
		marked = marked || strings.Contains(string(b), transport.Redacted)
	}
	if !marked {
		t.Error("no redaction marker in the database: the echo was not recorded")
	}
}
