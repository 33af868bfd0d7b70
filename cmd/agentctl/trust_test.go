package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_ShortSecretRefused: a secret reference resolving to fewer than
// 8 bytes ("true", one letter) cannot be redacted without corrupting
// results (it once turned {"ok":true} into invalid JSON and an executed
// call into a failure). It is refused when resolved, before anything is
// sent: exit 2, naming the reference, never the value.
func TestCLI_ShortSecretRefused(t *testing.T) {
	for _, value := range []string{"true", "e"} {
		srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
		t.Setenv("MCP_TOKEN", value)
		path := filepath.Join(t.TempDir(), "short.yaml")
		src := `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: short}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [MCP_TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s:
      url: ` + srv.URL + `
      headers:
        authorization: {env: MCP_TOKEN}
  actions:
    call: {kind: mcp.call, idempotency: at_most_once}
  tasks:
    - id: echo
      uses: action:call
      with: {server: s, tool: echo}
`
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := cli(t, "run", path, "--db", filepath.Join(t.TempDir(), "a.db"))
		if code != 2 || !strings.Contains(stderr, "env:MCP_TOKEN") {
			t.Errorf("secret %q: exit %d, stderr %q; want exit 2 naming env:MCP_TOKEN", value, code, stderr)
		}
		if len(value) > 1 && strings.Contains(stderr, value) {
			t.Errorf("stderr shows the secret value %q: %s", value, stderr)
		}
		if st := srv.Stats(); st.Posts != 0 {
			t.Errorf("secret %q: the server saw %d POSTs, want none", value, st.Posts)
		}
	}
}

// TestCLI_SchemaTooComplex: issue 13's doubling inputSchema (N=30 never
// ended, deaf to timeoutSeconds and SIGINT) and its recursive oneOf
// outputSchema on 30 nested arrays (24 GB RSS, response never logged) now
// end the run at once: a definitive failure (exit 4) naming the tool and
// schema_too_complex; the input case sends no tools/call at all.
func TestCLI_SchemaTooComplex(t *testing.T) {
	defs := map[string]any{}
	for i := range 30 {
		next := map[string]any{"$ref": fmt.Sprintf("#/$defs/a%d", i+1)}
		defs[fmt.Sprintf("a%d", i)] = map[string]any{"allOf": []any{next, next}}
	}
	defs["a30"] = map[string]any{"type": "object"}
	doubling, _ := json.Marshal(map[string]any{"type": "object", "$defs": defs, "allOf": []any{map[string]any{"$ref": "#/$defs/a0"}}})
	nested := mcptest.ToolDef{Name: "tree",
		OutputSchema: json.RawMessage(`{"$ref":"#/$defs/n","$defs":{"n":{"oneOf":[{"type":"array","items":{"$ref":"#/$defs/n"}},{"type":"array","items":{"$ref":"#/$defs/n"}}]}}}`),
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Raw: json.RawMessage(`{"content":[],"structuredContent":` + strings.Repeat("[", 30) + strings.Repeat("]", 30) + `}`)}, nil
		}}
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "doubling", InputSchema: doubling}, nested)
	for _, tc := range []struct {
		tool, idem string
		calls      int
	}{{"doubling", "at_most_once", 0}, {"tree", "idempotent", 1}} {
		path := filepath.Join(t.TempDir(), "complex.yaml")
		src := `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: complex}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s: {url: ` + srv.URL + `}
  actions:
    call: {kind: mcp.call, idempotency: ` + tc.idem + `}
  tasks:
    - id: t
      uses: action:call
      with: {server: s, tool: ` + tc.tool + `}
`
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		_, stderr, code := cli(t, "run", path, "--db", filepath.Join(t.TempDir(), "a.db"))
		if code != 4 || !strings.Contains(stderr, "schema_too_complex") || !strings.Contains(stderr, `"`+tc.tool+`"`) {
			t.Errorf("%s: exit %d, stderr %q; want exit 4 naming the tool and schema_too_complex", tc.tool, code, stderr)
		}
		if got := srv.Stats().Calls[tc.tool]; got != tc.calls {
			t.Errorf("%s: server saw %d tools/call, want %d", tc.tool, got, tc.calls)
		}
	}
}
