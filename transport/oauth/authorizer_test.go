package oauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/transport/oauth/oauthtest"
)

func call(t *testing.T, s *transport.Session, tool string) error {
	t.Helper()
	_, err := s.CallTool(context.Background(), transport.CallRequest{Tool: tool, Arguments: json.RawMessage(`{}`)}, nil)
	return err
}

// The whole flow against a real AS and a protected mcptest server: the
// 401 starts discovery, DCR, the authorization code with PKCE S256 and
// resource, the token; the request is re-sent once and executes once.
func TestAuthorizationCodeFlow(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	rec := &steps{}
	store := oauth.NewMemStore()
	auth, err := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser}, store, rec)
	if err != nil {
		t.Fatal(err)
	}
	s := connect(t, srv.URL, auth)
	if err := call(t, s, "echo"); err != nil {
		t.Fatal(err)
	}
	want := []oauth.StepKind{oauth.StepChallenge, oauth.StepResourceMeta, oauth.StepServerMeta, oauth.StepRegistered, oauth.StepAuthorize, oauth.StepToken}
	if got := rec.kinds(); !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	authz := as.Last("/authorize")
	if authz.Form.Get("code_challenge_method") != "S256" || authz.Form.Get("resource") != srv.URL || authz.Form.Get("state") == "" || authz.Form.Get("client_id") != "dcr-client-1" {
		t.Fatalf("authorization request %v", authz.Form)
	}
	tok := as.Last("/token")
	if tok.Form.Get("resource") != srv.URL || tok.Form.Get("code_verifier") == "" {
		t.Fatalf("token request %v", tok.Form)
	}
	if n := as.Count("/register", ""); n != 1 {
		t.Fatalf("%d registrations, want 1", n)
	}
	if st := srv.MCP.Stats(); st.Executed["echo"] != 1 || st.Initialize != 1 {
		t.Fatalf("server executed echo %d times, initialize %d, want 1, 1", st.Executed["echo"], st.Initialize)
	}
	k, ok := auth.Key()
	if !ok || k != (oauth.Key{Issuer: as.URL, Resource: srv.URL}) {
		t.Fatalf("key %+v %v", k, ok)
	}
	c, _ := store.Load(context.Background(), k)
	if c == nil || c.ClientID != "dcr-client-1" || c.AccessToken == "" || c.RefreshToken == "" {
		t.Fatalf("stored %v", c)
	}
	for _, st := range rec.s {
		b, _ := json.Marshal(st)
		if containsAny(string(b), c.AccessToken, c.RefreshToken, "code-") {
			t.Fatalf("a step carries a secret: %s", b)
		}
	}
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if x != "" && strings.Contains(s, x) {
			return true
		}
	}
	return false
}

// The request re-sent after a login goes on a new connection: the server
// may have closed the one that carried the 401 while the user logged in.
func TestResendOnFreshConnection(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	srv.DropAfter401()
	auth, _ := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser}, oauth.NewMemStore(), nil)
	if err := call(t, connect(t, srv.URL, auth), "echo"); err != nil {
		t.Fatal(err)
	}
	if st := srv.MCP.Stats(); st.Executed["echo"] != 1 {
		t.Fatalf("echo executed %d times", st.Executed["echo"])
	}
}

// A 401 on a token the resource no longer accepts refreshes it (resource
// sent, the rotated refresh token stored) and re-sends once: no new
// authorization, one execution.
func TestRefreshOn401(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	store := oauth.NewMemStore()
	auth, _ := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser}, store, nil)
	s := connect(t, srv.URL, auth)
	if err := call(t, s, "echo"); err != nil {
		t.Fatal(err)
	}
	k, _ := auth.Key()
	before, _ := store.Load(context.Background(), k)
	as.RevokeAccess()
	if err := call(t, s, "echo"); err != nil {
		t.Fatal(err)
	}
	if n := as.Count("/token", "refresh_token"); n != 1 {
		t.Fatalf("%d refresh requests, want 1", n)
	}
	if r := as.Last("/token"); r.Form.Get("resource") != srv.URL {
		t.Fatalf("refresh request without resource: %v", r.Form)
	}
	if n := as.Count("/authorize", ""); n != 1 {
		t.Fatalf("%d authorizations, want 1 (the refresh suffices)", n)
	}
	after, _ := store.Load(context.Background(), k)
	if after.RefreshToken == before.RefreshToken || after.AccessToken == before.AccessToken {
		t.Fatal("the rotated tokens were not stored")
	}
	if st := srv.MCP.Stats(); st.Executed["echo"] != 2 {
		t.Fatalf("echo executed %d times, want 2", st.Executed["echo"])
	}
}

// A second 401 for the same request is final: KindUnauthorized, the
// request sent twice and never executed.
func TestSecond401IsFinal(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	auth, _ := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser}, oauth.NewMemStore(), nil)
	s := connect(t, srv.URL, auth)
	srv.Always(401)
	err := call(t, s, "echo")
	var te *transport.Error
	if !errors.As(err, &te) || te.Kind != transport.KindUnauthorized {
		t.Fatalf("err %v, want KindUnauthorized", err)
	}
	n := srv.Refused(401)
	if n != 2 {
		t.Fatalf("the request was sent %d times, want 2", n)
	}
	if st := srv.MCP.Stats(); st.Executed["echo"] != 0 {
		t.Fatalf("echo executed %d times", st.Executed["echo"])
	}
}

// 403 insufficient_scope steps up with the union of the scopes held and
// challenged; a server that never accepts is given 3 authorizations in all.
func TestStepUp(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "write"})
	srv.Require("write", "files:write")
	rec := &steps{}
	auth, _ := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser, Scopes: []string{"files:read"}}, oauth.NewMemStore(), rec)
	s := connect(t, srv.URL, auth)
	if err := call(t, s, "write"); err != nil {
		t.Fatal(err)
	}
	if got := as.Last("/authorize").Form.Get("scope"); got != "files:read files:write" {
		t.Fatalf("step-up scope %q, want the union", got)
	}
	if n := as.Count("/authorize", ""); n != 2 {
		t.Fatalf("%d authorizations, want 2", n)
	}
	if st := srv.MCP.Stats(); st.Executed["write"] != 1 {
		t.Fatalf("write executed %d times", st.Executed["write"])
	}

	srv.Always(403)
	err := call(t, s, "write")
	if err == nil {
		t.Fatal("an always-403 server succeeded")
	}
	// 3 authorizations for this call: the 2 step-ups of the limit, then
	// the third 403 is final (2 before it, for the first call).
	if n := as.Count("/authorize", ""); n != 4 {
		t.Fatalf("%d authorizations, want 4 (the step-up limit)", n)
	}
}

// Two Authorizers sharing a Store (two workers): the second uses the
// credentials the first obtained, without an authorization of its own.
func TestStoreSharedAcrossAuthorizers(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	store := oauth.NewMemStore()
	a1, _ := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser}, store, nil)
	if err := call(t, connect(t, srv.URL, a1), "echo"); err != nil {
		t.Fatal(err)
	}
	// The second has no browser: it would fail if it needed a login.
	a2, _ := oauth.New(srv.URL, oauth.Config{}, store, nil)
	if err := call(t, connect(t, srv.URL, a2), "echo"); err != nil {
		t.Fatal(err)
	}
	if n, m := as.Count("/authorize", ""), as.Count("/token", ""); n != 1 || m != 1 {
		t.Fatalf("%d authorizations and %d token requests, want 1 and 1", n, m)
	}
}

// Without a browser hook and without stored credentials, the 401 is
// ErrLoginRequired at once (no wait), nothing authorized.
func TestLoginRequired(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	auth, _ := oauth.New(srv.URL, oauth.Config{}, oauth.NewMemStore(), nil)
	c, _ := transport.New(transport.Config{URL: srv.URL, Authorizer: auth,
		Policy: transport.Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true}})
	_, err := c.Connect(context.Background(), nil)
	if !errors.Is(err, oauth.ErrLoginRequired) {
		t.Fatalf("err %v, want ErrLoginRequired", err)
	}
	if n := as.Count("/authorize", ""); n != 0 {
		t.Fatalf("%d authorizations", n)
	}
}

// The token endpoint authentication follows the AS metadata for a
// pre-registered confidential client.
func TestTokenEndpointAuthMethod(t *testing.T) {
	for _, tc := range []struct{ supported, want string }{
		{"client_secret_basic", "basic"}, {"client_secret_post", "post"}, {"none", "none"},
	} {
		t.Run(tc.supported, func(t *testing.T) {
			as := oauthtest.NewAS(t)
			as.Set("token_endpoint_auth_methods_supported", []string{tc.supported})
			srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
			auth, _ := oauth.New(srv.URL, oauth.Config{ClientID: "pre-1", ClientSecret: "pre-secret-value", OpenBrowser: oauthtest.Browser}, oauth.NewMemStore(), nil)
			if err := call(t, connect(t, srv.URL, auth), "echo"); err != nil {
				t.Fatal(err)
			}
			r := as.Last("/token")
			got := "none"
			switch {
			case r.BasicClientID == "pre-1":
				got = "basic"
			case r.Form.Get("client_secret") == "pre-secret-value":
				got = "post"
			}
			if got != tc.want || as.Count("/register", "") != 0 {
				t.Fatalf("auth %s (registrations %d), want %s and none", got, as.Count("/register", ""), tc.want)
			}
		})
	}
}

// Bad input is refused before any code or token leaves agentctl.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(as *oauthtest.AS, srv *oauthtest.Resource)
		cfg   oauth.Config
		want  error
		msg   string // a part of the error's text, when the sentinel is not enough
	}{
		{name: "no S256", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) {
			as.Set("code_challenge_methods_supported", []string{"plain"})
		}, want: oauth.ErrMetadata},
		{name: "no PKCE", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) { as.Set("code_challenge_methods_supported", nil) }, want: oauth.ErrMetadata},
		{name: "issuer mismatch", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) { as.Set("issuer", "https://attacker.example") }, want: oauth.ErrMetadata},
		{name: "http token endpoint not loopback", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) {
			as.Set("token_endpoint", "http://as.example.com/token")
		}, want: oauth.ErrInsecure},
		{name: "iss mismatch", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) { as.SetIss("https://evil.example") }, want: oauth.ErrNotAuthorized},
		{name: "iss missing when advertised", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) { as.SetIss("-") }, want: oauth.ErrNotAuthorized},
		{name: "metadata too large", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) { as.Set("padding", strings.Repeat("x", 1<<20)) }, want: oauth.ErrMetadata, msg: "larger than"},
		{name: "resource mismatch", setup: func(as *oauthtest.AS, srv *oauthtest.Resource) { srv.SetMetadataResource("https://evil.example/mcp") }, want: oauth.ErrMetadata},
		{name: "redirect not loopback", cfg: oauth.Config{RedirectURI: "http://example.com/callback"}, want: oauth.ErrInsecure},
	} {
		t.Run(tc.name, func(t *testing.T) {
			as := oauthtest.NewAS(t)
			srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
			if tc.setup != nil {
				tc.setup(as, srv)
			}
			cfg := tc.cfg
			cfg.OpenBrowser = oauthtest.Browser
			auth, _ := oauth.New(srv.URL, cfg, oauth.NewMemStore(), nil)
			c, _ := transport.New(transport.Config{URL: srv.URL, Authorizer: auth, Timeout: 10 * time.Second,
				Policy: transport.Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true}})
			_, err := c.Connect(context.Background(), nil)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("err %v, want %v (%q)", err, tc.want, tc.msg)
			}
			if n := as.Count("/token", ""); n != 0 {
				t.Fatalf("%d token requests", n)
			}
		})
	}
}

// Login (agentctl auth login) obtains and stores credentials ahead of a
// run, which then calls without a browser.
func TestLoginThenRun(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	store := oauth.NewMemStore()
	rec := &steps{}
	login, _ := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser}, store, rec)
	if err := login.Login(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k, ok := login.Key(); !ok || k.Issuer != as.URL {
		t.Fatalf("key %+v %v after login", k, ok)
	}
	if st := srv.MCP.Stats(); st.Posts != 0 {
		t.Fatalf("login reached the MCP server %d times", st.Posts)
	}
	run, _ := oauth.New(srv.URL, oauth.Config{}, store, nil)
	if err := call(t, connect(t, srv.URL, run), "echo"); err != nil {
		t.Fatal(err)
	}
	if n, m := as.Count("/authorize", ""), as.Count("/token", ""); n != 1 || m != 1 {
		t.Fatalf("%d authorizations and %d token requests, want 1 and 1", n, m)
	}
}

// A forged authorization response on the loopback callback (another local
// process guessing the port) is ignored: the real one completes the login.
func TestForgedCallbackIgnored(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	forged := 0
	browse := func(ctx context.Context, u string) error {
		parsed, err := url.Parse(u)
		if err != nil {
			return err
		}
		cb, err := url.Parse(parsed.Query().Get("redirect_uri"))
		if err != nil {
			return err
		}
		cb.RawQuery = url.Values{"code": {"attacker-code"}, "state": {"guessed"}, "iss": {as.URL}}.Encode()
		resp, err := http.Get(cb.String())
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusBadRequest {
			forged++
		}
		return oauthtest.Browser(ctx, u)
	}
	auth, _ := oauth.New(srv.URL, oauth.Config{OpenBrowser: browse}, oauth.NewMemStore(), nil)
	if err := call(t, connect(t, srv.URL, auth), "echo"); err != nil {
		t.Fatal(err)
	}
	if forged != 1 || as.Last("/token").Form.Get("code") == "attacker-code" {
		t.Fatalf("forged response refused %d times, token request code %q", forged, as.Last("/token").Form.Get("code"))
	}
}

// The authorization server's connections end with the last session of the
// transport client the Authorizer serves: a run's OAuth client is its own
// (workflow builds one per run), and its idle connections would otherwise
// stay open for the pool's idle timeout after the run.
func TestASConnectionsEndWithLastSession(t *testing.T) {
	as := oauthtest.NewAS(t)
	srv := oauthtest.Protect(t, as, mcptest.Options{}, mcptest.ToolDef{Name: "echo"})
	pol := transport.Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true, NetworkAllowlist: []string{"127.0.0.1"}}
	auth, err := oauth.New(srv.URL, oauth.Config{OpenBrowser: oauthtest.Browser, HTTPClient: transport.PolicyClient(pol)}, oauth.NewMemStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := transport.New(transport.Config{URL: srv.URL, Authorizer: auth, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := call(t, s, "echo"); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := as.WaitNoConnections(t, 10*time.Second); n == 0 {
		t.Fatal("the login made no connection to the AS")
	}
}
