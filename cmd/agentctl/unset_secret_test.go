package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_UnsetSecretIsExit2: a header secret whose environment variable is
// unset is a local setup mistake: run and the ad hoc commands exit 2 naming
// env:NAME and the file:line:col of the reference, before anything is sent
// (the server sees no request) or recorded (no run).
func TestCLI_UnsetSecretIsExit2(t *testing.T) {
	const name = "AGENTCTL_TEST_UNSET_TOKEN"
	if err := os.Unsetenv(name); err != nil {
		t.Fatal(err)
	}
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	wf := filepath.Join(dir, "wf.yaml")
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: secret}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [%s]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local:
      url: %q
      headers:
        authorization: {env: %s}
  actions: {a: {kind: mcp.call, idempotency: pure}}
  tasks:
    - id: t
      uses: action:a
      with: {server: local, tool: echo}
`, name, srv.URL, name)
	if err := os.WriteFile(wf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"run", wf},
		{"mcp", "call", srv.URL, "echo", "--header", "authorization=env:" + name, "--allow-private"},
		{"mcp", "tools", srv.URL, "--header", "authorization=env:" + name, "--allow-private"},
	} {
		_, stderr, code := cli(t, append(args, "--db", db)...)
		if code != 2 || !strings.Contains(stderr, "env:"+name) {
			t.Fatalf("%v: exit %d, want 2 naming env:%s\n%s", args, code, name, stderr)
		}
		if args[0] == "run" && !strings.Contains(stderr, wf+":13:") {
			t.Fatalf("%v does not name %s:13 where the reference is:\n%s", args, wf, stderr)
		}
	}
	if st := srv.Stats(); st.Posts != 0 || st.Gets != 0 {
		t.Fatalf("server saw %d POSTs, %d GETs", st.Posts, st.Gets)
	}
	if _, err := os.Stat(db); err == nil && runCount(t, db) != 0 {
		t.Fatal("a run was recorded")
	}
}
