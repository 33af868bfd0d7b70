package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/transport/oauth/oauthtest"
)

// oauthBrowser sets $BROWSER to this test binary in its browser mode
// (TestMain), which follows the authorization URL to agentctl's callback.
func oauthBrowser(t *testing.T) {
	t.Setenv("BROWSER", "env AGENTCTL_TEST_BROWSER=1 "+os.Args[0])
}

// `mcp call --oauth` against a protected server: the authorization-code
// flow through $BROWSER, the tool executed once, and no token value in the
// output or the database file.
func TestCLI_OAuthCall(t *testing.T) {
	testOAuthCall(t, "idempotent")
}

// The 401 that starts the login means the call did not execute: it is
// re-sent after the login whatever its idempotency class, and executes once.
func TestCLI_OAuthEveryIdempotencyClass(t *testing.T) {
	for _, class := range []string{"pure", "keyed", "at_most_once", "unknown"} {
		t.Run(class, func(t *testing.T) { testOAuthCall(t, class) })
	}
}

func testOAuthCall(t *testing.T, class string) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	oauthBrowser(t)
	db := filepath.Join(t.TempDir(), "a.db")
	stdout, stderr, code := cli(t, "mcp", "call", srv.URL, "echo", "--args", "{}", "--allow-private", "--idempotency", class,
		"--oauth", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := as.Count("/authorize", ""); n != 1 {
		t.Fatalf("%d authorizations, want 1", n)
	}
	if st := srv.MCP.Stats(); st.Executed["echo"] != 1 {
		t.Fatalf("echo executed %d times", st.Executed["echo"])
	}
	for _, want := range []string{"auth: registered", "auth: token"} {
		if !strings.Contains(stderr, want) {
			t.Fatalf("stderr lacks %q:\n%s\nstdout:%s", want, stderr, stdout)
		}
	}
	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	for where, text := range map[string]string{"stdout": stdout, "stderr": stderr, "database": string(b)} {
		for _, secret := range []string{"access-token-", "refresh-token-", "code-"} {
			if strings.Contains(text, secret) {
				t.Fatalf("%s holds a %s value", where, strings.TrimSuffix(secret, "-"))
			}
		}
	}
}

// Without a browser (--oauth-no-browser) a login that needs the user fails
// at once with exit 6, naming the reason, before any tool is called; a
// client secret needs a client id (exit 2).
func TestCLI_OAuthRefusals(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	db := filepath.Join(t.TempDir(), "a.db")
	_, stderr, code := cli(t, "mcp", "call", srv.URL, "echo", "--allow-private", "--oauth-no-browser", "--db", db)
	if code != 6 || !strings.Contains(stderr, "login required") {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if st := srv.MCP.Stats(); st.Executed["echo"] != 0 || as.Count("/authorize", "") != 0 {
		t.Fatal("a call or an authorization happened without a login")
	}
	t.Setenv("SOME_SECRET", "a-client-secret")
	_, stderr, code = cli(t, "mcp", "call", srv.URL, "echo", "--allow-private", "--oauth-client-secret-env", "SOME_SECRET", "--db", db)
	if code != 2 || !strings.Contains(stderr, "--oauth-client-id") {
		t.Fatalf("exit %d, want 2: %s", code, stderr)
	}
}
