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

// TestCLI_CheckWarnsUnsetSecret: offline check of a valid file whose
// header secret's variable is unset warns, naming env:NAME and where the
// reference is (human and json), and still exits 0; with the variable set
// there is no warning.
func TestCLI_CheckWarnsUnsetSecret(t *testing.T) {
	const name = "AGENTCTL_TEST_CHECK_TOKEN"
	t.Setenv(name, "")
	wf := filepath.Join(t.TempDir(), "wf.yaml")
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: secret}
spec:
  policy:
    environmentAllowlist: [%s]
  mcpServers:
    s:
      url: https://mcp.example.com/mcp
      headers:
        authorization: {env: %s}
  actions: {a: {kind: mcp.call, idempotency: pure}}
  tasks:
    - {id: t, uses: action:a, with: {server: s, tool: echo}}
`, name, name)
	if err := os.WriteFile(wf, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := cli(t, "check", wf)
	if code != 0 || !strings.Contains(out, wf+":11:") || !strings.Contains(out, "warning: ") || !strings.Contains(out, "env:"+name) {
		t.Fatalf("check with %s unset: exit %d\n%s%s", name, code, out, stderr)
	}
	out, _, code = cli(t, "check", wf, "--output", "json")
	if code != 0 || !strings.Contains(out, `"warnings": [`) || !strings.Contains(out, "env:"+name) {
		t.Fatalf("json check with %s unset: exit %d\n%s", name, code, out)
	}
	t.Setenv(name, "a-token-value")
	if out, _, code = cli(t, "check", wf); code != 0 || strings.Contains(out, "warning") {
		t.Fatalf("check with %s set: exit %d\n%s", name, code, out)
	}
}
