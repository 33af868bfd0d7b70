package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_AuthChallengeToRefusedHostNotFollowed (issue 31 follow-up, SSRF):
// a hostile MCP server's 401 names protected resource metadata on a host
// the workflow's network policy refuses (127.0.0.2, outside its
// networkAllowlist [127.0.0.1], standing in for 169.254.169.254 or an
// internal service). The run fails naming that host, and not one request
// reaches it: the OAuth requests obey the same policy as the server's own
// traffic.
func TestCLI_AuthChallengeToRefusedHostNotFollowed(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Skipf("listen on 127.0.0.2: %v", err)
	}
	var internal atomic.Int64
	meta := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		internal.Add(1)
		_, _ = w.Write([]byte(`{"resource":"x","authorization_servers":["http://127.0.0.2/"]}`))
	}))
	meta.Listener.Close()
	meta.Listener = l
	meta.Start()
	t.Cleanup(meta.Close)

	m := mcptest.NewServer(mcptest.Options{}, actTool())
	t.Cleanup(m.Close)
	hostile := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+meta.URL+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
	}))
	t.Cleanup(hostile.Close)

	db := testkit.Backends(t)[0].DSN(t)
	enableEncryption(t, db)
	t.Setenv("CLIENT_SECRET", secretCanary)
	wf := testkit.Workflow{Name: "hostile", URL: hostile.URL + "/mcp",
		PolicyKeys: []string{"environmentAllowlist: [CLIENT_SECRET]"},
		ServerKeys: []string{"auth: {oauth: {grant: client_credentials, clientId: agentctl-ci, clientSecret: {env: CLIENT_SECRET}}}"},
		Tasks:      []testkit.Task{{ID: "only", Action: "act", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 1}"}},
	}.WriteFile(t)
	out, stderr, code := cli(t, "run", wf, "--db", db)
	if code != 3 || !strings.Contains(stderr, `"127.0.0.2" not in network allowlist`) {
		t.Fatalf("run: exit %d; want 3 (policy) naming host 127.0.0.2 outside the allowlist\n%s\n%s", code, out, stderr)
	}
	if n := internal.Load(); n != 0 {
		t.Fatalf("the refused host got %d requests", n)
	}
	if strings.Contains(out+stderr, secretCanary) {
		t.Fatal("the client secret is in the output")
	}
}
