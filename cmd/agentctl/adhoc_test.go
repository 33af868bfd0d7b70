package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/transport/mcptest"
)

func TestCLI_McpCallRecordedAndInspectable(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "mcp", "call", url, "echo", "--args", `{"message":"hi"}`, "--idempotency", "pure", "--allow-private", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
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
	if got, _ := json.Marshal(env.Data.Outputs); string(got) != `{"result":{"message":"hi"}}` {
		t.Fatalf("outputs = %s", got)
	}
	if srv.Calls("echo") != 1 {
		t.Fatalf("server ran echo %d times", srv.Calls("echo"))
	}
	out, stderr, code = cli(t, "inspect", env.Data.RunID, "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, `"tool": "echo"`) || !strings.Contains(out, `"idempotency": "pure"`) {
		t.Fatalf("inspect exit %d: %s %s", code, out, stderr)
	}
}

func TestCLI_McpCallLoopbackNeedsAllowPrivate(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	_, stderr, code := cli(t, "mcp", "call", url, "echo", "--args", `{"message":"hi"}`, "--db", db)
	if code != 3 || !strings.Contains(stderr, "--allow-private") {
		t.Fatalf("exit %d, want 3 (policy); stderr %s", code, stderr)
	}
	if srv.Calls("echo") != 0 {
		t.Fatal("the server was called")
	}
}

func TestCLI_McpTools(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "mcp", "tools", url, "--allow-private", "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, name := range demoserver.ToolNames {
		if !strings.Contains(out, name) {
			t.Errorf("tool %s not listed:\n%s", name, out)
		}
	}
}

func TestCLI_CheckAndCompletion(t *testing.T) {
	out, stderr, code := cli(t, "check", "../../examples/lookup.yaml")
	if code != 0 || !strings.Contains(out, "ok") {
		t.Fatalf("check exit %d: %s %s", code, out, stderr)
	}
	for _, sh := range []string{"bash", "zsh", "fish"} {
		out, stderr, code := cli(t, "completion", sh)
		if code != 0 || !strings.Contains(out, "agentctl") {
			t.Fatalf("completion %s: exit %d %s", sh, code, stderr)
		}
	}
}

func TestCLI_SchemaIsJSON(t *testing.T) {
	out, stderr, code := cli(t, "schema")
	if code != 0 {
		t.Fatal(stderr)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("schema is not JSON: %v", err)
	}
	if !strings.Contains(out, "mcpServers") || !strings.Contains(out, "idempotency") {
		t.Fatalf("schema lacks workflow keys")
	}
}

func TestCLI_McpCallFileHeader(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.EchoHeaders("headers"))
	dir := t.TempDir()
	secret := filepath.Join(dir, "token")
	if err := os.WriteFile(secret, []byte("canary-file-secret-4711\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "a.db")
	out, stderr, code := cli(t, "mcp", "call", srv.URL, "headers", "--header", "x-token=file:"+secret, "--allow-private", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if strings.Contains(out+stderr, "canary-file-secret-4711") {
		t.Fatal("secret value in output")
	}
	st := srv.Stats()
	if len(st.Requests) == 0 || st.Requests[len(st.Requests)-1].Header.Get("X-Token") != "canary-file-secret-4711" {
		t.Fatal("server did not receive the file secret")
	}
}
