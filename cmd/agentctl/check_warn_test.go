package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_CheckWarnsRetryOnAtMostOnce: check of a valid file whose
// at_most_once action has a retry policy exits 0 with a warning at the
// retry key, in human and JSON output; an idempotent one draws none.
func TestCLI_CheckWarnsRetryOnAtMostOnce(t *testing.T) {
	src := `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: w}
spec:
  mcpServers:
    s: {url: "https://mcp.example.com/mcp"}
  actions:
    pay: {kind: mcp.call, idempotency: at_most_once, retry: {maxAttempts: 3}}
  tasks:
    - {id: a, uses: action:pay, with: {server: s, tool: t}}
`
	path := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, code := cli(t, "check", path)
	if code != 0 || !strings.Contains(out, path+":8:") || !strings.Contains(out, "warning: spec.actions.pay.retry: retry on an action whose idempotency is at_most_once") ||
		!strings.Contains(out, ": ok (w, 1 tasks)") {
		t.Fatalf("check: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, stderr)
	}
	out, stderr, code = cli(t, "check", path, "--output", "json")
	var env struct {
		OK   bool `json:"ok"`
		Data struct {
			Warnings []struct {
				Field   string `json:"field"`
				Line    int    `json:"line"`
				Message string `json:"message"`
			} `json:"warnings"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || code != 0 || !env.OK || len(env.Data.Warnings) != 1 ||
		env.Data.Warnings[0].Field != "spec.actions.pay.retry" || env.Data.Warnings[0].Line != 8 {
		t.Fatalf("check --output json: exit %d %v\n%s\n%s", code, err, out, stderr)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(src, "at_most_once", "idempotent", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _, code = cli(t, "check", path); code != 0 || strings.Contains(out, "warning") {
		t.Fatalf("check of an idempotent retry: exit %d\n%s", code, out)
	}
}
