package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// Canaries: a token or secret value that shows up anywhere it must not.
const (
	tokenCanary   = "tok-5e1f3a77-canary"
	secretCanary  = "sec-9b2c44d1-canary"
	refreshCanary = "rt-0c9d8e7f-canary"
	// workloadCanary is a workload identity token (jwt-bearer assertion).
	workloadCanary = "wl-3d2e1f00-canary"
)

// oauthServer is an MCP server behind MCP authorization, with its own
// authorization server on the same loopback origin (the issuer): protected
// resource metadata, authorization server metadata, an authorize endpoint
// (redirects at once, as a logged-in user would) and a token endpoint
// (client credentials with client_secret_basic, authorization code with
// PKCE). It counts what it was asked.
type oauthServer struct {
	*httptest.Server
	mcp *mcptest.Server

	mu       sync.Mutex
	tokens   map[string]bool
	grants   map[string]int // grant_type → tokens issued
	unauthed int            // /mcp requests refused with 401
	codes    map[string]string
	clientID string
	secret   string
}

func newOAuthServer(t *testing.T, clientID, secret string) *oauthServer {
	t.Helper()
	m := mcptest.NewServer(mcptest.Options{}, actTool())
	t.Cleanup(m.Close)
	s := &oauthServer{mcp: m, tokens: map[string]bool{}, grants: map[string]int{}, codes: map[string]string{}, clientID: clientID, secret: secret}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", s.protected)
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"resource": s.URL + "/mcp", "authorization_servers": []string{s.URL}, "scopes_supported": []string{"act"}})
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": s.URL, "token_endpoint": s.URL + "/token", "authorization_endpoint": s.URL + "/authorize",
			"grant_types_supported": []string{"authorization_code", "client_credentials", "refresh_token", "urn:ietf:params:oauth:grant-type:jwt-bearer"}, "code_challenge_methods_supported": []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code := fmt.Sprintf("code-%d", len(s.codes))
		s.mu.Lock()
		s.codes[code] = q.Get("code_challenge")
		s.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("/token", s.token)
	s.Server = httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

func (s *oauthServer) protected(w http.ResponseWriter, r *http.Request) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	s.mu.Lock()
	ok := scheme == "Bearer" && s.tokens[tok]
	if !ok {
		s.unauthed++
	}
	s.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+s.URL+`/.well-known/oauth-protected-resource/mcp"`)
		http.Error(w, `{"error":"unauthorized"}`, http.StatusUnauthorized)
		return
	}
	s.mcp.ServeHTTP(w, r)
}

func (s *oauthServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	id, secret, _ := r.BasicAuth()
	gt := r.PostForm.Get("grant_type")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case gt == "client_credentials" && (id != s.clientID || secret != s.secret):
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
		return
	case gt == "authorization_code" && s.codes[r.PostForm.Get("code")] == "":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	case gt == "urn:ietf:params:oauth:grant-type:jwt-bearer" && r.PostForm.Get("assertion") != workloadCanary:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	case gt != "client_credentials" && gt != "authorization_code" && gt != "urn:ietf:params:oauth:grant-type:jwt-bearer":
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"unsupported_grant_type"}`))
		return
	}
	delete(s.codes, r.PostForm.Get("code"))
	s.grants[gt]++
	tok := fmt.Sprintf("%s-%s-%d", tokenCanary, gt, s.grants[gt])
	s.tokens[tok] = true
	resp := map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "scope": "act"}
	if gt == "authorization_code" {
		resp["refresh_token"] = refreshCanary
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *oauthServer) counts() (grants map[string]int, unauthed int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := map[string]int{}
	for k, v := range s.grants {
		g[k] = v
	}
	return g, s.unauthed
}

// authWorkflow writes a workflow calling act on srv with the auth block.
func authWorkflow(t *testing.T, srv *oauthServer, auth string) string {
	t.Helper()
	return testkit.Workflow{Name: "authorized", URL: srv.URL + "/mcp",
		PolicyKeys: []string{"environmentAllowlist: [CLIENT_SECRET]"},
		ServerKeys: []string{"auth: " + auth},
		Tasks:      []testkit.Task{{ID: "only", Action: "act", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 1}"}},
		Outputs:    []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
}

// TestCLI_AuthClientCredentialsNoSecretAnywhere (issue 31 items 3-5): a
// run against a server whose auth block uses client credentials gets one
// token (counted at the token endpoint), calls the tool with it, records
// every auth step as an event, and no token or client secret value is in
// the database (file, -wal, -shm; every row on PostgreSQL), the output,
// inspect, or an audit export.
func TestCLI_AuthClientCredentialsNoSecretAnywhere(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		srv := newOAuthServer(t, "agentctl-ci", secretCanary)
		t.Setenv("CLIENT_SECRET", secretCanary)
		db := b.DSN(t)
		enableEncryption(t, db)
		wf := authWorkflow(t, srv, "{oauth: {grant: client_credentials, clientId: agentctl-ci, clientSecret: {env: CLIENT_SECRET}, scopes: [act]}}")
		out, stderr, code := cli(t, "run", wf, "--db", db, "--output", "json")
		if code != 0 {
			t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
		}
		grants, unauthed := srv.counts()
		if grants["client_credentials"] != 1 || unauthed != 1 || srv.mcp.Stats().Executed["act"] != 1 {
			t.Fatalf("token endpoint grants %v, 401s %d, act executed %d; want one client_credentials token after one 401, act once", grants, unauthed, srv.mcp.Stats().Executed["act"])
		}
		runID := jsonRunID(t, out)
		insp, _, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
		if code != 0 {
			t.Fatalf("inspect: exit %d", code)
		}
		var doc struct {
			Data struct {
				AuthSteps []projector.AuthStepView `json:"authSteps"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(insp), &doc); err != nil {
			t.Fatal(err)
		}
		var kinds []string
		for _, s := range doc.Data.AuthSteps {
			kinds = append(kinds, s.Kind)
		}
		if got := strings.Join(kinds, " "); got != "challenge resource_meta server_meta token" {
			t.Fatalf("auth steps %q; want challenge resource_meta server_meta token", got)
		}
		human, _, _ := cli(t, "inspect", runID, "--db", db)
		report, _, code := cli(t, "inspect", runID, "--db", db, "--html", "-o", "-")
		if code != 0 || !strings.Contains(report, `<section id="auth">`) || !strings.Contains(report, "client_secret_basic") {
			t.Fatalf("report: exit %d; want the authorization section with the token step", code)
		}
		export, _, code := cli(t, "audit", "export", runID, "--db", db)
		if code != 0 {
			t.Fatalf("audit export: exit %d", code)
		}
		status, _, _ := cli(t, "auth", "status", "--db", db, "--output", "jsonl")
		if !strings.Contains(status, `"clientId":"agentctl-ci"`) || !strings.Contains(status, `"sealed":true`) {
			t.Fatalf("auth status: want the sealed login of agentctl-ci:\n%s", status)
		}
		for _, c := range []string{tokenCanary, secretCanary} {
			if dbHolds(t, db, c) {
				t.Errorf("the database holds %s in clear", c)
			}
			for name, text := range map[string]string{"run output": out + stderr, "inspect": insp + human, "report": report, "audit export": export, "auth status": status} {
				if strings.Contains(text, c) {
					t.Errorf("%s shows %s", name, c)
				}
			}
		}
	})
}

// TestCLI_AuthPlaintextRefused: without encryption the token cannot be
// stored, so the run fails before the tool is called, naming the way out;
// --allow-plaintext-credentials opts in.
func TestCLI_AuthPlaintextRefused(t *testing.T) {
	srv := newOAuthServer(t, "agentctl-ci", secretCanary)
	t.Setenv("CLIENT_SECRET", secretCanary)
	db := testkit.Backends(t)[0].DSN(t)
	wf := authWorkflow(t, srv, "{oauth: {grant: client_credentials, clientId: agentctl-ci, clientSecret: {env: CLIENT_SECRET}}}")
	_, stderr, code := cli(t, "run", wf, "--db", db)
	if code == 0 || !strings.Contains(stderr, "--allow-plaintext-credentials") || srv.mcp.Stats().Executed["act"] != 0 {
		t.Fatalf("run without encryption: exit %d, act executed %d; want a failure naming --allow-plaintext-credentials, no call:\n%s", code, srv.mcp.Stats().Executed["act"], stderr)
	}
	if _, stderr, code := cli(t, "run", wf, "--db", db, "--allow-plaintext-credentials"); code != 0 || srv.mcp.Stats().Executed["act"] != 1 {
		t.Fatalf("run with --allow-plaintext-credentials: exit %d, act executed %d:\n%s", code, srv.mcp.Stats().Executed["act"], stderr)
	}
}

// TestCLI_AuthLoginRequired: a run whose server needs a user's login that
// was never made fails at once (exit 6), naming the login command, without
// a request to the server; check --remote says the same. After `auth
// login` (the test's browser follows the redirect), the run uses the
// stored token without a new grant; `auth logout` forgets it.
func TestCLI_AuthLoginRequired(t *testing.T) {
	srv := newOAuthServer(t, "", "")
	db := testkit.Backends(t)[0].DSN(t)
	enableEncryption(t, db)
	wf := authWorkflow(t, srv, "{oauth: {clientId: agentctl-cli, scopes: [act]}}")
	want := "agentctl auth login -f " + wf + " local"
	for _, args := range [][]string{{"run", wf}, {"check", "--remote", wf}} {
		_, stderr, code := cli(t, append(args, "--db", db)...)
		if code != 6 || !strings.Contains(stderr, want) {
			t.Fatalf("%s: exit %d; want 6 naming %q:\n%s", args[0], code, want, stderr)
		}
	}
	if st := srv.mcp.Stats(); st.Posts != 0 {
		t.Fatalf("the server got %d requests before a login", st.Posts)
	}
	t.Setenv("BROWSER", "curl -sfL -o /dev/null")
	out, stderr, code := cli(t, "auth", "login", "-f", wf, "local", "--db", db)
	if code != 0 || !strings.Contains(out, srv.URL) {
		t.Fatalf("auth login: exit %d\n%s\n%s", code, out, stderr)
	}
	if _, stderr, code := cli(t, "run", wf, "--db", db); code != 0 {
		t.Fatalf("run after login: exit %d\n%s", code, stderr)
	}
	if grants, _ := srv.counts(); grants["authorization_code"] != 1 || srv.mcp.Stats().Executed["act"] != 1 {
		t.Fatalf("grants %v, act executed %d; want the login's one token used by the run", grants, srv.mcp.Stats().Executed["act"])
	}
	for _, c := range []string{tokenCanary, refreshCanary} {
		if strings.Contains(out+stderr, c) || dbHolds(t, db, c) {
			t.Errorf("%s is in the login's output or the database in clear", c)
		}
	}
	if out, _, code := cli(t, "auth", "logout", "-f", wf, "local", "--db", db); code != 0 || !strings.Contains(out, "forgot 1") {
		t.Fatalf("logout: exit %d: %s", code, out)
	}
	if _, _, code := cli(t, "run", wf, "--db", db); code != 6 {
		t.Fatalf("run after logout: exit %d, want 6", code)
	}
}

// TestCLI_AuthWorkloadIdentity: a server whose auth block uses the
// jwt_bearer grant gets its token for the platform's workload token (a
// secret file under the policy's roots), sent as the assertion; the token
// file's value appears nowhere.
func TestCLI_AuthWorkloadIdentity(t *testing.T) {
	srv := newOAuthServer(t, "", "")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "mcp-token")
	if err := os.WriteFile(tokenFile, []byte(workloadCanary+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	db := testkit.Backends(t)[0].DSN(t)
	enableEncryption(t, db)
	wf := testkit.Workflow{Name: "federated", URL: srv.URL + "/mcp",
		PolicyKeys: []string{"secretFileRoots: [" + dir + "]"},
		ServerKeys: []string{"auth: {oauth: {grant: jwt_bearer, clientId: fleet, assertion: {file: " + tokenFile + "}}}"},
		Tasks:      []testkit.Task{{ID: "only", Action: "act", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 1}"}}}.WriteFile(t)
	out, stderr, code := cli(t, "run", wf, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, stderr)
	}
	if grants, _ := srv.counts(); grants["urn:ietf:params:oauth:grant-type:jwt-bearer"] != 1 || srv.mcp.Stats().Executed["act"] != 1 {
		t.Fatalf("grants %v, act executed %d; want one jwt-bearer token, one call", grants, srv.mcp.Stats().Executed["act"])
	}
	for _, c := range []string{workloadCanary, tokenCanary} {
		if strings.Contains(out+stderr, c) || dbHolds(t, db, c) {
			t.Errorf("%s is in the output or the database in clear", c)
		}
	}
}
