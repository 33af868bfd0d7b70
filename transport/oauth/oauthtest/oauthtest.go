// Package oauthtest is a real OAuth 2.1 authorization server and a
// protected MCP server, both in-process on 127.0.0.1, for tests of the
// MCP authorization client (package transport/oauth) and its callers.
package oauthtest

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
	"time"

	"github.com/agentctl/agentctl/internal/connstate"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// AS is an authorization server: metadata, dynamic registration, an
// authorization endpoint that approves at once (302 to the redirect with
// code, state and iss), and a token endpoint that checks PKCE S256 and
// rotates refresh tokens (a spent one is refused).
type AS struct {
	// URL is the issuer, e.g. "http://127.0.0.1:41234".
	URL string

	mu       sync.Mutex
	meta     map[string]any
	issOut   string // "" = the issuer; "-" = none; else that value
	requests []Request
	codes    map[string]codeGrant
	access   map[string][]string // live access token → scopes
	refresh  map[string][]string // live refresh token → scopes
	next     int

	conns connstate.Counter // the clients' connections to the AS
}

// WaitNoConnections fails tb unless every connection a client made to the
// AS is closed within d; it reports how many the AS accepted in all.
func (as *AS) WaitNoConnections(tb testing.TB, d time.Duration) int {
	tb.Helper()
	return as.conns.WaitClosed(tb, "the AS", d)
}

// Request is one request the AS received.
type Request struct {
	Path          string
	Form          url.Values // query and form
	BasicClientID string     // the client id of a Basic Authorization header
}

type codeGrant struct {
	challenge, redirect string
	scopes              []string
}

// NewAS starts an AS closed at tb's cleanup; its metadata advertises S256,
// the iss parameter, registration and token endpoint auth "none".
func NewAS(tb testing.TB) *AS {
	tb.Helper()
	as := &AS{codes: map[string]codeGrant{}, access: map[string][]string{}, refresh: map[string][]string{}}
	as.URL = serveCounted(tb, http.HandlerFunc(as.serve), as.conns.Hook)
	u := as.URL
	as.meta = map[string]any{
		"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
		"registration_endpoint": u + "/register", "response_types_supported": []string{"code"},
		"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"},
		"authorization_response_iss_parameter_supported": true,
	}
	return as
}

func serve(tb testing.TB, h http.Handler) string { return serveCounted(tb, h, nil) }

// serveCounted is serve with a ConnState hook (nil: none).
func serveCounted(tb testing.TB, h http.Handler, state func(net.Conn, http.ConnState)) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ts := &httptest.Server{Listener: l, Config: &http.Server{Handler: h, ConnState: state}}
	ts.Start()
	tb.Cleanup(ts.Close)
	return ts.URL
}

// Set sets (nil: removes) a member of the AS metadata.
func (as *AS) Set(key string, v any) {
	as.mu.Lock()
	defer as.mu.Unlock()
	if v == nil {
		delete(as.meta, key)
		return
	}
	as.meta[key] = v
}

// SetIss sets the iss of the authorization response: "" the issuer, "-"
// none, else that value.
func (as *AS) SetIss(v string) {
	as.mu.Lock()
	defer as.mu.Unlock()
	as.issOut = v
}

// RevokeAccess forgets every access token (the resource answers 401).
func (as *AS) RevokeAccess() {
	as.mu.Lock()
	defer as.mu.Unlock()
	clear(as.access)
}

// Scopes reports the scopes of a live access token.
func (as *AS) Scopes(token string) ([]string, bool) {
	as.mu.Lock()
	defer as.mu.Unlock()
	s, ok := as.access[token]
	return s, ok
}

// Count is the number of requests to path (with that grant_type, if set).
func (as *AS) Count(path, grant string) int {
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

// Last is the last request to path (zero when none).
func (as *AS) Last(path string) Request {
	as.mu.Lock()
	defer as.mu.Unlock()
	for i := len(as.requests) - 1; i >= 0; i-- {
		if as.requests[i].Path == path {
			return as.requests[i]
		}
	}
	return Request{}
}

func (as *AS) serve(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	as.mu.Lock()
	defer as.mu.Unlock()
	req := Request{Path: r.URL.Path, Form: r.Form}
	if id, _, ok := r.BasicAuth(); ok {
		req.BasicClientID = id
	}
	as.requests = append(as.requests, req)
	switch r.URL.Path {
	case "/.well-known/oauth-authorization-server":
		writeJSON(w, http.StatusOK, as.meta)
	case "/register":
		var m map[string]any
		_ = json.NewDecoder(r.Body).Decode(&m)
		as.next++
		writeJSON(w, http.StatusCreated, map[string]any{"client_id": fmt.Sprintf("dcr-client-%d", as.next), "redirect_uris": m["redirect_uris"]})
	case "/authorize":
		q := r.URL.Query()
		as.next++
		code := fmt.Sprintf("code-%d", as.next)
		as.codes[code] = codeGrant{challenge: q.Get("code_challenge"), redirect: q.Get("redirect_uri"), scopes: strings.Fields(q.Get("scope"))}
		to, err := url.Parse(q.Get("redirect_uri"))
		if err != nil {
			http.Error(w, "bad redirect_uri", http.StatusBadRequest)
			return
		}
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

func (as *AS) token(w http.ResponseWriter, r *http.Request) {
	var scopes []string
	switch r.Form.Get("grant_type") {
	case "authorization_code":
		g, ok := as.codes[r.Form.Get("code")]
		delete(as.codes, r.Form.Get("code"))
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.Form.Get("redirect_uri") != g.redirect {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		}
		scopes = g.scopes
	case "refresh_token":
		s, ok := as.refresh[r.Form.Get("refresh_token")]
		if !ok {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "invalid_grant"})
			return
		}
		delete(as.refresh, r.Form.Get("refresh_token")) // rotation: spent
		scopes = s
	default:
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "unsupported_grant_type"})
		return
	}
	as.next++
	at, rt := fmt.Sprintf("access-token-%04d", as.next), fmt.Sprintf("refresh-token-%04d", as.next)
	as.access[at], as.refresh[rt] = scopes, scopes
	writeJSON(w, http.StatusOK, map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 3600, "scope": strings.Join(scopes, " ")})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// Resource is an mcptest server behind a bearer check against an AS, with
// its protected resource metadata at the path-inserted well-known URL.
type Resource struct {
	// URL is the MCP endpoint, e.g. "http://127.0.0.1:41234/mcp".
	URL string
	// MCP is the server behind the check (its Stats count what executed).
	MCP *mcptest.Server

	mu           sync.Mutex
	need         map[string][]string // tool → required scopes
	always       int
	refused      map[int]int
	metaResource string
	// dropAfter401: a connection that carried a 401 is reset when reused,
	// as a server's keep-alive timeout does during a long login.
	dropAfter401 bool
	answered401  map[string]bool // remote addresses
}

// Protect starts an mcptest server serving tools behind a bearer check
// against as, closed at tb's cleanup.
func Protect(tb testing.TB, as *AS, opts mcptest.Options, tools ...mcptest.ToolDef) *Resource {
	tb.Helper()
	p := &Resource{MCP: mcptest.Start(tb, opts, tools...), need: map[string][]string{}, refused: map[int]int{}, answered401: map[string]bool{}}
	var base string
	base = serve(tb, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		res, always := p.metaResource, p.always
		p.mu.Unlock()
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			if res == "" {
				res = base + "/mcp"
			}
			writeJSON(w, http.StatusOK, map[string]any{"resource": res, "authorization_servers": []string{as.URL}})
			return
		}
		if p.reset(w, r) {
			return
		}
		challenge := fmt.Sprintf(`Bearer resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, base)
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		scopes, ok := as.Scopes(tok)
		if !ok || always == http.StatusUnauthorized {
			p.count(http.StatusUnauthorized)
			p.mu.Lock()
			p.answered401[r.RemoteAddr] = true
			p.mu.Unlock()
			w.Header().Set("WWW-Authenticate", challenge+`, error="invalid_token"`)
			writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "invalid_token"})
			return
		}
		tool := toolOf(r)
		p.mu.Lock()
		need := p.need[tool]
		p.mu.Unlock()
		if tool != "" && (!covers(scopes, need) || always == http.StatusForbidden) {
			p.count(http.StatusForbidden)
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`%s, error="insufficient_scope", scope="%s"`, challenge, strings.Join(need, " ")))
			writeJSON(w, http.StatusForbidden, map[string]any{"error": "insufficient_scope"})
			return
		}
		p.MCP.ServeHTTP(w, r)
	}))
	p.URL = base + "/mcp"
	return p
}

// Require makes tool need scopes (403 insufficient_scope without them).
func (p *Resource) Require(tool string, scopes ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.need[tool] = scopes
}

// Always answers status (401 or 403; 0: stop) to every authorized request
// (403: to every tools/call), and resets the refusal counts.
func (p *Resource) Always(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.always = status
	clear(p.refused)
}

// Refused is the number of requests answered status.
func (p *Resource) Refused(status int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused[status]
}

// DropAfter401 makes the server reset (TCP RST, no response) a connection
// reused after it answered 401 on it: a keep-alive connection the server
// closed while the client was logging in.
func (p *Resource) DropAfter401() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dropAfter401 = true
}

// reset resets r's connection when DropAfter401 applies to it.
func (p *Resource) reset(w http.ResponseWriter, r *http.Request) bool {
	p.mu.Lock()
	drop := p.dropAfter401 && p.answered401[r.RemoteAddr]
	p.mu.Unlock()
	if !drop {
		return false
	}
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return false
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
	return true
}

// SetMetadataResource overrides the resource its metadata names.
func (p *Resource) SetMetadataResource(r string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.metaResource = r
}

func (p *Resource) count(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refused[status]++
}

func covers(held, want []string) bool {
	for _, s := range want {
		if !slices.Contains(held, s) {
			return false
		}
	}
	return true
}

// toolOf is the tool a tools/call POST names, the body restored.
func toolOf(r *http.Request) string {
	if r.Method != http.MethodPost || r.Body == nil {
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
	if json.Unmarshal(b, &m) != nil || m.Method != "tools/call" {
		return ""
	}
	return m.Params.Name
}

// Browser follows an authorization URL and its redirects, as a user's
// browser would: an oauth.Config.OpenBrowser for tests.
func Browser(ctx context.Context, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Close = true // the browser's connection ends with its visit (AS.WaitNoConnections)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
