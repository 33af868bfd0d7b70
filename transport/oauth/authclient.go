package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Client is an [Authorizer] with the extensions: the client credentials
// grant (clientcreds.go) and DPoP (dpop.go). It is what the transport and
// the CLI use for a server; it has the Authorizer's methods and contract.
// DPoP is used when the configuration asks for it (Config.DPoP) or the
// authorization server advertises dpop_signing_alg_values_supported with
// ES256.
type Client struct {
	*Authorizer
	dpop *dpopState
	// assertion gives the JWT of GrantJWTBearer for an authorization
	// server (issuer) and resource.
	assertion func(ctx context.Context, issuer, resource string) (string, error)

	mu       sync.Mutex
	dpopAS   map[string]bool // issuer → advertises ES256 DPoP proofs
	lastKey  string          // the stored DPoP JWK last parsed
	lastDPoP *dpopKey
}

// ClientOption configures a Client beyond Config.
type ClientOption func(*Client)

// WithAssertion gives the JWT of the jwt-bearer grant (GrantJWTBearer):
// a workload identity token (workload identity federation), or an
// identity assertion grant from the enterprise's IdP (IDJAG). It is called
// for every token request, so a token file the platform rotates is read
// afresh. Its value is a secret.
func WithAssertion(f func(ctx context.Context, issuer, resource string) (string, error)) ClientOption {
	return func(c *Client) { c.assertion = f }
}

// NewClient returns the Client for the MCP server at serverURL; like New.
func NewClient(serverURL string, cfg Config, store Store, obs Observer, opts ...ClientOption) (*Client, error) {
	if store == nil {
		return nil, fmt.Errorf("oauth: nil Store")
	}
	c := &Client{dpop: &dpopState{}, dpopAS: map[string]bool{}}
	for _, o := range opts {
		o(c)
	}
	a, err := New(serverURL, cfg, dpopStore{Store: store, c: c}, obs)
	if err != nil {
		return nil, err
	}
	a.assertion = c.assertion
	hc := *a.client()
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = dpopTokenTransport{base: metaSniffer{base: base, c: c}, state: c.dpop}
	a.cfg.HTTPClient = &hc
	c.Authorizer = a
	return c, nil
}

// Authorize sets req's Authorization header and, for a DPoP-bound token,
// a fresh DPoP proof bound to it (with the server's nonce, if it gave one).
func (c *Client) Authorize(ctx context.Context, req *http.Request) error {
	if err := c.Authorizer.Authorize(ctx, req); err != nil {
		return err
	}
	scheme, tok, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "dpop") {
		return nil
	}
	c.Authorizer.mu.Lock()
	var raw []byte
	if c.Authorizer.cur != nil {
		raw = c.Authorizer.cur.DPoPKey
	}
	c.Authorizer.mu.Unlock()
	key, err := c.dpopKeyOf(raw)
	if err != nil {
		return err
	}
	target := req.URL.String()
	p, err := key.proof(req.Method, target, tok, c.dpop.nonce(target), c.dpop.clock())
	if err != nil {
		return err
	}
	req.Header.Set("DPoP", p)
	return nil
}

// dpopKeyOf parses a stored DPoP key, reusing the last one parsed.
func (c *Client) dpopKeyOf(raw []byte) (*dpopKey, error) {
	if len(raw) == 0 {
		return nil, errNoDPoPKey
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lastDPoP != nil && c.lastKey == string(raw) {
		return c.lastDPoP, nil
	}
	k, err := parseDPoPKey(raw)
	if err != nil {
		return nil, err
	}
	c.lastKey, c.lastDPoP = string(raw), k
	return k, nil
}

// OnUnauthorized answers a 401. A DPoP use_dpop_nonce challenge keeps the
// server's nonce and asks for a re-send (the token is fine); else as the
// Authorizer (whose grant dispatch covers the headless grants).
func (c *Client) OnUnauthorized(ctx context.Context, resp *http.Response) error {
	target := c.resource
	if resp.Request != nil {
		target = resp.Request.URL.String()
	}
	noted := c.dpop.noteNonce(target, resp.Header)
	ch := parseChallenge(resp.Header)
	if ch.err == "use_dpop_nonce" && noted && resp.Request != nil && resp.Request.Header.Get("DPoP") != "" {
		c.observe(ctx, Step{Kind: StepChallenge, Detail: "401 use_dpop_nonce", URL: withoutQuery(ch.resourceMetadata)})
		return nil
	}
	return c.Authorizer.OnUnauthorized(ctx, resp)
}

// dpopStore gives every credential set a DPoP key when DPoP is used with
// its issuer: the stored one, else a new one kept with what fn returns. The
// key is the token transport's while fn runs (under the Store's lock).
type dpopStore struct {
	Store
	c *Client
}

// Update implements Store.
func (s dpopStore) Update(ctx context.Context, k Key, fn func(cur *Credentials) (*Credentials, error)) (*Credentials, error) {
	if !s.c.usesDPoP(k.Issuer) {
		s.c.dpop.setKey(nil)
		return s.Store.Update(ctx, k, fn)
	}
	return s.Store.Update(ctx, k, func(cur *Credentials) (*Credentials, error) {
		var key *dpopKey
		var raw json.RawMessage
		if cur != nil && len(cur.DPoPKey) > 0 {
			if k, err := parseDPoPKey(cur.DPoPKey); err == nil {
				key, raw = k, cur.DPoPKey
			}
		}
		if key == nil {
			k, err := newDPoPKey()
			if err != nil {
				return nil, err
			}
			if raw, err = k.marshal(); err != nil {
				return nil, err
			}
			key = k
		}
		s.c.dpop.setKey(key)
		defer s.c.dpop.setKey(nil)
		next, err := fn(cur)
		if err != nil || next == nil {
			return next, err
		}
		if len(next.DPoPKey) == 0 {
			n := *next
			n.DPoPKey = raw
			next = &n
		}
		return next, nil
	})
}

// usesDPoP reports whether tokens of issuer are DPoP-bound.
func (c *Client) usesDPoP(issuer string) bool {
	if c.cfg.DPoP {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dpopAS[strings.TrimSuffix(issuer, "/")]
}

// metaSniffer notes, from the authorization server metadata the Authorizer
// fetches, which issuers accept ES256 DPoP proofs. It reads a metadata
// body (bounded) and hands it on unchanged.
type metaSniffer struct {
	base http.RoundTripper
	c    *Client
}

// RoundTrip implements http.RoundTripper.
func (m metaSniffer) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := m.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodGet || resp.StatusCode != http.StatusOK ||
		!(strings.Contains(req.URL.Path, "/.well-known/oauth-authorization-server") || strings.Contains(req.URL.Path, "/.well-known/openid-configuration")) {
		return resp, err
	}
	raw, rerr := io.ReadAll(io.LimitReader(resp.Body, maxSniff+1))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(raw))
	if rerr != nil || len(raw) > maxSniff {
		return resp, nil // the Authorizer's own bound judges it
	}
	var meta struct {
		Issuer string   `json:"issuer"`
		Algs   []string `json:"dpop_signing_alg_values_supported"`
	}
	if json.Unmarshal(raw, &meta) == nil && meta.Issuer != "" {
		ok := false
		for _, a := range meta.Algs {
			ok = ok || a == string(dpopAlg)
		}
		m.c.mu.Lock()
		m.c.dpopAS[strings.TrimSuffix(meta.Issuer, "/")] = ok
		m.c.mu.Unlock()
	}
	return resp, nil
}

// maxSniff bounds the metadata body metaSniffer reads.
const maxSniff = 1 << 20
