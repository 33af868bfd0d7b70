package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// argsEcho answers with the arguments it received, and keeps them.
func argsEcho(got *[]string, mu *sync.Mutex) mcptest.ToolDef {
	return mcptest.ToolDef{Name: "say", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		mu.Lock()
		*got = append(*got, string(c.Arguments))
		mu.Unlock()
		var m map[string]any
		_ = json.Unmarshal(c.Arguments, &m)
		return &mcptest.Result{Content: mcptest.Text("said"), StructuredContent: m}, nil
	}}
}

// TestCLI_McpCallArgsAreData: --args is data, not template source: a
// "${{ … }}" in it reaches the server as written, and the run replays
// (the recorded workflow reads back to
// the same literal).
func TestCLI_McpCallArgsAreData(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv := mcptest.Start(t, mcptest.Options{}, argsEcho(&got, &mu))
	db := filepath.Join(t.TempDir(), "a.db")
	args := `{"message":"literal ${{ inputs.x }} and $${{ y }}","n":1234567,"list":["${{ tasks.call.output }}"]}`
	out, stderr, code := cli(t, "mcp", "call", srv.URL, "say", "--args", args, "--idempotency", "pure", "--allow-private", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("mcp call: exit %d\n%s", code, stderr)
	}
	if len(got) != 1 || got[0] != `{"list":["${{ tasks.call.output }}"],"message":"literal ${{ inputs.x }} and $${{ y }}","n":1234567}` {
		t.Fatalf("server received %q", got)
	}
	runID := jsonRunID(t, out)
	if _, stderr, code := cli(t, "replay", runID, "--db", db); code != 0 {
		t.Fatalf("replay of the ad hoc call: exit %d\n%s", code, stderr)
	}
	if len(got) != 1 {
		t.Fatalf("replay reached the server: %q", got)
	}
}

// TestCLI_McpHeaderLiteral: --header NAME=VALUE is accepted ad hoc: the
// server receives the value, a warning says it shows in the process list,
// and the value is nowhere in the database (redacted like any secret).
func TestCLI_McpHeaderLiteral(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.EchoHeaders("headers"))
	db := filepath.Join(t.TempDir(), "a.db")
	const secret = "Bearer lit3ral-t0ken-value"
	out, stderr, code := cli(t, "mcp", "call", srv.URL, "headers", "--header", "X-Api-Key="+secret, "--idempotency", "pure", "--allow-private", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("mcp call: exit %d\n%s", code, stderr)
	}
	if !strings.Contains(stderr, "visible in the process list") || strings.Contains(stderr, "lit3ral") {
		t.Fatalf("stderr lacks the warning, or shows the value:\n%s", stderr)
	}
	st := srv.Stats()
	if n := len(st.Requests); n == 0 || st.Requests[n-1].Header.Get("X-Api-Key") != secret {
		t.Fatalf("server did not receive the literal header")
	}
	if strings.Contains(out, "lit3ral") {
		t.Fatalf("stdout shows the value:\n%s", out)
	}
	raw, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(raw, []byte("lit3ral")) {
		t.Fatal("the literal header value is in the database")
	}
	// Too short to redact safely (the token of "Bearer x" too): refused, value not echoed.
	for _, v := range []string{"s3cr", "Bearer xq7z"} {
		_, stderr, code = cli(t, "mcp", "call", srv.URL, "headers", "--header", "X-Api-Key="+v, "--allow-private", "--db", db)
		if code != 2 || strings.Contains(stderr, v) {
			t.Fatalf("--header with %q: exit %d, want 2 without the value\n%s", v, code, stderr)
		}
	}
}
