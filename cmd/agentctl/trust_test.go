package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport"
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
	plain := nested
	plain.Name, plain.OutputSchema = "plain", nil
	srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "doubling", InputSchema: doubling}, nested, plain)
	for _, tc := range []struct {
		tool, idem string
		calls      int
		contract   string // the task's own outputSchema (YAML), validated on the remote output
	}{{"doubling", "at_most_once", 0, ""}, {"tree", "idempotent", 1, ""}, {"plain", "idempotent", 1, `
      outputSchema:
        $ref: "#/$defs/n"
        $defs:
          n: {oneOf: [{type: array, items: {$ref: "#/$defs/n"}}, {type: array, items: {$ref: "#/$defs/n"}}]}`}} {
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
      with: {server: s, tool: ` + tc.tool + `}` + tc.contract + `
`
		if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
		name := `"` + tc.tool + `"`
		if tc.contract != "" {
			name = `"task outputSchema"`
		}
		_, stderr, code := cli(t, "run", path, "--db", filepath.Join(t.TempDir(), "a.db"))
		if code != 4 || !strings.Contains(stderr, "schema_too_complex") || !strings.Contains(stderr, name) {
			t.Errorf("%s: exit %d, stderr %q; want exit 4 naming the tool and schema_too_complex", tc.tool, code, stderr)
		}
		if got := srv.Stats().Calls[tc.tool]; got != tc.calls {
			t.Errorf("%s: server saw %d tools/call, want %d", tc.tool, got, tc.calls)
		}
	}
}

// kanaryToken is issue 13's credential; servers echo it escaped.
const kanaryToken = "Bearer Kan4ry/Tok3n-QQ7"

var jsonEscape = regexp.MustCompile(`\\u[0-9a-fA-F]{4}|\\/`)

// leakedPrefix returns the longest prefix (8 bytes or more) of the token
// found in s once its JSON escapes are decoded, or "".
func leakedPrefix(s string) string {
	dec := jsonEscape.ReplaceAllStringFunc(s, func(e string) string {
		if e == `\/` {
			return "/"
		}
		n, _ := strconv.ParseUint(e[2:], 16, 16)
		return string(rune(n))
	})
	for _, form := range []string{kanaryToken, "Kan4ry/Tok3n-QQ7"} {
		for n := len(form); n >= 8; n-- {
			if strings.Contains(dec, form[:n]) {
				return form[:n]
			}
		}
	}
	return ""
}

// TestCLI_EscapedSecretsNeverLeak: a server echoing the credential with
// "\/" (PHP's default) or every character \u-escaped, and a JSON-RPC error
// of 1,002 'x' then the token (cut at 1,024 bytes), leaked it, whole or
// minus its last byte, to task.finished, run --output jsonl, audit export,
// stderr and inspect. No prefix of 8 bytes or more may appear anywhere.
func TestCLI_EscapedSecretsNeverLeak(t *testing.T) {
	echo := mcptest.ToolDef{Name: "echo", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		a := c.Header.Get("Authorization")
		var all strings.Builder
		for _, r := range a {
			fmt.Fprintf(&all, `\u%04x`, r)
		}
		slash := strings.ReplaceAll(a, "/", `\/`)
		return &mcptest.Result{Raw: json.RawMessage(`{"content":[{"type":"text","text":"` + slash + `"}],"structuredContent":{"php":"` + slash + `","all":"` + all.String() + `","ok":true}}`)}, nil
	}}
	fail := mcptest.ToolDef{Name: "fail", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		return nil, &mcptest.RPCError{Code: -32000, Message: strings.Repeat("x", 1002) + c.Header.Get("Authorization")}
	}}
	srv := mcptest.Start(t, mcptest.Options{}, echo, fail)
	t.Setenv("MCP_TOKEN", kanaryToken)
	db := filepath.Join(t.TempDir(), "a.db")
	check := func(what, s string) {
		t.Helper()
		if p := leakedPrefix(s); p != "" {
			t.Errorf("%s leaks %q", what, p)
		}
	}
	var runIDs []string
	for _, tc := range []struct {
		tool, output string
		code         int
	}{{"echo", "jsonl", 0}, {"echo", "json", 0}, {"fail", "human", 4}, {"fail", "jsonl", 4}} {
		path := tokenWorkflow(t, "echo", srv.URL, tc.tool, `
  outputs:
    echoed: "${{ tasks.t.output }}"
`)
		out, stderr, code := cli(t, "run", path, "--db", db, "--output", tc.output)
		if code != tc.code {
			t.Fatalf("run %s: exit %d, want %d: %s", tc.tool, code, tc.code, stderr)
		}
		what := "run " + tc.tool + " --output " + tc.output
		check(what+" stdout", out)
		check(what+" stderr", stderr)
		if !strings.Contains(out+stderr, transport.Redacted) {
			t.Errorf("%s: no redaction marker: the echo did not reach the output (stdout %q, stderr %q)", what, out, stderr)
		}
		runIDs = append(runIDs, lastRunID(t, db))
	}
	for _, id := range runIDs {
		for _, args := range [][]string{{"inspect", id, "--output", "json"}, {"inspect", id}} {
			out, stderr, _ := cli(t, append(args, "--db", db)...)
			check(strings.Join(args, " "), out+stderr)
		}
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		if _, stderr, code := cli(t, "audit", "export", id, "-o", file, "--db", db); code != 0 {
			t.Fatalf("audit export: exit %d %s", code, stderr)
		}
		b, _ := os.ReadFile(file)
		check("audit export", string(b))
	}
	for suffix, b := range dbFiles(t, db) {
		check("database a.db"+suffix, string(b))
	}
}

// tokenWorkflow writes a workflow named name that calls tool on the server
// at url once (at_most_once) with the Authorization header from MCP_TOKEN,
// followed by extra (YAML under spec), and returns its path.
func tokenWorkflow(t *testing.T, name, url, tool, extra string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name+".yaml")
	src := `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: ` + name + `}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [MCP_TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s:
      url: ` + url + `
      headers:
        authorization: {env: MCP_TOKEN}
  actions:
    call: {kind: mcp.call, idempotency: at_most_once}
  tasks:
    - id: t
      uses: action:call
      with: {server: s, tool: ` + tool + `}
` + strings.TrimPrefix(extra, "\n")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
