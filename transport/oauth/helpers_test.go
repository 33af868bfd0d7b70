package oauth_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/transport/oauth"
)

// testAS is a real in-process OAuth 2.1 authorization server on 127.0.0.1:
// metadata, dynamic registration, an authorization endpoint that approves
// at once (302 to the redirect with code, state and iss), and a token
// endpoint checking PKCE S256 and rotating refresh tokens.
type testAS struct {
	ts *httptest.Server

	mu     sync.Mutex
	meta   map[string]any // served metadata (edit before use)
	issOut string         // iss sent in the redirect; "" = the issuer; "-" = none
	// prmResource overrides the resource the protected server's metadata names.
	prmResource string
	requests    []asRequest
	codes       map[string]codeGrant
	access      map[string][]string // live access token → scopes
	refresh     map[string][]string // live refresh token → scopes
	next        int
}

type asRequest struct {
	Path  string
	Form  url.Values
	Basic string // client id of a Basic Authorization header
}

type codeGrant struct {
	challenge, redirect, resource string
	scopes                        []string
}

func newAS(t *testing.T) *testAS {
	t.Helper()
	as := &testAS{codes: map[string]codeGrant{}, access: map[string][]string{}, refresh: map[string][]string{}}
	as.ts = newLoopbackServer(t, http.HandlerFunc(as.serve))
	u := as.ts.URL
	as.meta = map[string]any{
		"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
		"registration_endpoint": u + "/register", "response_types_supported": []string{"code"},
		"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"},
		"authorization_response_iss_parameter_supported": true,
	}
	return as
}

func newLoopbackServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ts := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

func (as *testAS) serve(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	as.mu.Lock()
	defer as.mu.Unlock()
	req := asRequest{Path: r.URL.Path, Form: r.Form}
	if id, _, ok := r.BasicAuth(); ok {
		req.Basic = id
	}
	as.requests = append(as.requests, req)
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		writeJSON(w, 200, as.meta)
	case "/register":
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		as.next++
		writeJSON(w, 201, map[string]any{"client_id": fmt.Sprintf("dcr-client-%d", as.next), "redirect_uris": m["redirect_uris"]})
	case "/authorize":
		q := r.URL.Query()
		as.next++
		code := fmt.Sprintf("code-%d", as.next)
		as.codes[code] = codeGrant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), resource: q.Get("resource"), scopes: strings.Fields(q.Get("scope"))}
		to, _ := url.Parse(q.Get("redirect_uri"))
		v := to.Query()
		v.Set("code", code)
		v.Set("state", q.Get("state"))
		switch as.issOut {
		case "":
			v.Set("iss", as.meta["issuer"].(string))
		case "-":
		default:
			v.Set("iss", as.issOut)
		}
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	case "/token":
		as.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

func (as *testAS) token(w http.ResponseWriter, r *http.Request) {
	var scopes []string
	switch r.Form.Get("grant_type") {
	case "authorization_code":
		g, ok := as.codes[r.Form.Get("code")]
		delete(as.codes, r.Form.Get("code"))
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.Form.Get("redirect_uri") != g.redirect {
			writeJSON(w, 400, map[string]any{"error": "invalid_grant"})
			return
		}
		scopes = g.scopes
	case "refresh_token":
		s, ok := as.refresh[r.Form.Get("refresh_token")]
		if !ok {
			writeJSON(w, 400, map[string]any{"error": "invalid_grant"})
			return
		}
		delete(as.refresh, r.Form.Get("refresh_token")) // rotation: spent
		scopes = s
	default:
		writeJSON(w, 400, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	as.next++
	at, rt := fmt.Sprintf("access-token-%04d", as.next), fmt.Sprintf("refresh-token-%04d", as.next)
	as.access[at], as.refresh[rt] = scopes, scopes
	writeJSON(w, 200, map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 3600, "scope": strings.Join(scopes, " ")})
}

// revokeAccess forgets every access token (the resource answers 401).
func (as *testAS) revokeAccess() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.access)
}

func (as *testAS) scopesOf(tok string) ([]string, bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	s, ok := as.access[tok]
	return s, ok
}

// count is the number of requests to path (with grant_type grant when set).
func (as *testAS) count(path, grant string) int {
	as.mu.Lock()
	defer as.mu.Unlock()
	n := 0
	for _, r := range as.requests {
		if r.Path == path && (grant == "" || r.Form.Get("grant_type") == grant) {
			n++
		}
	}
	return n
}

func (as *testAS) last(path string) asRequest {
	as.mu.Lock()
	defer as.mu.Unlock()
	for i := len(as.requests) - 1; i >= 0; i-- {
		if as.requests[i].Path == path {
			return as.requests[i]
		}
	}
	return asRequest{}
}

func (as *testAS) set(k string, v any) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if v == nil {
		delete(as.meta, k)
		return
	}
	as.meta[k] = v
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// protected is an mcptest server behind a bearer check against as, with
// its protected resource metadata. Tools named in need require the scopes
// given (403 insufficient_scope otherwise).
type protected struct {
	URL string
	mcp *mcptest.Server

	mu      sync.Mutex
	need    map[string][]string // tool → required scopes
	always  int                 // answer this status to every authorized request (0: none)
	refused map[int]int         // status → count
}

func newProtected(t *testing.T, as *testAS, tools ...mcptest.ToolDef) *protected {
	t.Helper()
	p := &protected{mcp: mcptest.Start(t, mcptest.Options{}, tools...), need: map[string][]string{}, refused: map[int]int{}}
	var ts *httptest.Server
	ts = newLoopbackServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			res := ts.URL + "/mcp"
			if as.prmResource != "" {
				res = as.prmResource
			}
			writeJSON(w, 200, map[string]any{"resource": res, "authorization_servers": []string{as.ts.URL}})
			return
		}
		challenge := fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, ts.URL)
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		scopes, ok := as.scopesOf(tok)
		p.mu.Lock()
		always := p.always
		if !ok || always == 401 {
			p.refused[401]++
			p.mu.Unlock()
			w.Header().Set("WWW-Authenticate", challenge+`, error="invalid_token"`)
			writeJSON(w, 401, map[string]any{"error": "invalid_token"})
			return
		}
		if tool := toolOf(r); tool != "" && (!covers(scopes, p.need[tool]) || always == 403) {
			p.refused[403]++
			need := strings.Join(p.need[tool], " ")
			p.mu.Unlock()
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`%s, error="insufficient_scope", scope="%s"`, challenge, need))
			writeJSON(w, 403, map[string]any{"error": "insufficient_scope"})
			return
		}
		p.mu.Unlock()
		p.mcp.ServeHTTP(w, r)
	}))
	p.URL = ts.URL + "/mcp"
	return p
}

func covers(held, want []string) bool {
	for _, s := range want {
		if !slices.Contains(held, s) {
			return false
		}
	}
	return true
}

// toolOf is the tool a tools/call POST names, reading and restoring the body.
func toolOf(r *http.Request) string {
	if r.Method != http.MethodPost {
		return ""
	}
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	var m struct {
		Method string `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal(b, &m)
	if m.Method != "tools/call" {
		return ""
	}
	return m.Params.Name
}

// browser follows the authorization URL and its redirects, as a user's would.
func browser(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// steps records the Observer's steps.
type steps struct {
	mu sync.Mutex
	s  []oauth.Step
}

func (r *steps) AuthStep(_ context.Context, s oauth.Step) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.s = append(r.s, s)
}

func (r *steps) kinds() []oauth.StepKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	var k []oauth.StepKind
	for _, s := range r.s {
		k = append(k, s.Kind)
	}
	return k
}

// connect opens a transport session to url with auth.
func connect(t *testing.T, u string, auth transport.Authorizer) *transport.Session {
	t.Helper()
	c, err := transport.New(transport.Config{URL: u, Authorizer: auth,
		Policy: transport.Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true, NetworkAllowlist: []string{"127.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Connect(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}
