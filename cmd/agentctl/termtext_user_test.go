package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_UserTextNeutralised: the user's own text reaches the terminal
// through the one sanitizer too. A workflow file whose name, metadata.name
// and output key carry terminal escapes and a bidi override (a file one
// downloaded) is printed inert by check, check --remote and run; the JSON
// output keeps the text as data.
func TestCLI_UserTextNeutralised(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "echo",
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("fine")}, nil
		}})
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: "evil \e]0;owned\a \u202Eeman\u202C"}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s: {url: %q}
  actions:
    call: {kind: mcp.call, idempotency: pure}
  tasks:
    - id: t
      uses: action:call
      with: {server: s, tool: echo}
  outputs:
    "key\e[31m\u202E": "${{ tasks.t.output }}"
`, srv.URL)
	file := filepath.Join(t.TempDir(), "wf\x1b[2J.yaml")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "a.db")
	for _, args := range [][]string{
		{"check", file},
		{"check", "--remote", file, "--db", db},
		{"run", file, "--db", db},
	} {
		what := strings.Join(args[:len(args)-1], " ")
		stdout, stderr, code := cli(t, args...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", what, code, stderr)
		}
		want := "evil "
		if args[0] == "run" {
			want = "key"
		}
		if !strings.Contains(stdout, want) {
			t.Fatalf("%s: stdout does not show the user's text %q: %q", what, want, stdout)
		}
		for name, out := range map[string]string{"stdout": stdout, "stderr": stderr} {
			if loc := unsafeOnTerminal.FindStringIndex(out); loc != nil {
				t.Fatalf("%s: %s carries %q at %d: %q", what, name, out[loc[0]:loc[1]], loc[0], out)
			}
		}
	}
	// JSON keeps the data as data: the escape is there, escaped by JSON.
	stdout, stderr, code := cli(t, "check", file, "--output", "json")
	if code != 0 || !strings.Contains(stdout, `evil \u001b]0;owned`) {
		t.Fatalf("check --output json: exit %d, %s %s; want the name as data", code, stdout, stderr)
	}
}
