package oauth

import (
	"context"
	"errors"
	"net/http"
	"sync"
)

// Authorizer is the transport's entry point for one server (resource): it
// sets each request's Authorization (and DPoP) headers and answers the
// server's 401 and 403 challenges. It is safe for concurrent use.
type Authorizer struct {
	cfg      Config
	resource string // the MCP server URL (canonical resource URI)
	store    Store
	obs      Observer
	// assertion gives the JWT of GrantJWTBearer (set by NewClient's
	// WithAssertion); nil: that grant is refused.
	assertion func(ctx context.Context, issuer, resource string) (string, error)

	mu     sync.Mutex   // guards the fields below
	disc   *discovery   // the last discovery
	cur    *Credentials // the credentials in use
	scopes []string     // the scopes requested so far (accumulated by step-up)
}

// CloseIdleConnections closes the idle connections of Config.HTTPClient,
// through which its metadata, registration and token requests went (nil:
// nothing; the default client's pool is not its own). The transport calls
// it when the last session of the client it authorizes closes, so that a
// run's authorization server connections end with the run.
func (a *Authorizer) CloseIdleConnections() {
	if a.cfg.HTTPClient != nil {
		a.cfg.HTTPClient.CloseIdleConnections()
	}
}

// New returns an Authorizer for the MCP server at serverURL. store keeps
// the credentials (NewMemStore for a one-shot command); obs may be nil.
func New(serverURL string, cfg Config, store Store, obs Observer) (*Authorizer, error) {
	if store == nil {
		return nil, errors.New("oauth: nil Store")
	}
	res, err := canonicalResource(serverURL)
	if err != nil {
		return nil, err
	}
	if cfg.Grant == "" {
		cfg.Grant = GrantAuthorizationCode
	}
	return &Authorizer{cfg: cfg, resource: res, store: store, obs: obs}, nil
}

// Authorize sets req's Authorization header (and DPoP proof) from the
// stored credentials; with none yet it sets nothing, and the server's 401
// starts discovery.
func (a *Authorizer) Authorize(ctx context.Context, req *http.Request) error {
	return a.authorize(ctx, req)
}

// OnUnauthorized answers a 401: it parses the WWW-Authenticate challenge,
// then refreshes the token or obtains a new one (discovery, registration,
// grant). nil means the request may be re-sent once.
func (a *Authorizer) OnUnauthorized(ctx context.Context, resp *http.Response) error {
	return a.onUnauthorized(ctx, resp)
}

// OnForbidden answers a 403: with error="insufficient_scope" it steps up
// (the challenge's scopes added to those held, a new grant) and returns nil
// so the request may be re-sent; otherwise, or past the step-up limit, it
// returns an error wrapping ErrNotAuthorized.
func (a *Authorizer) OnForbidden(ctx context.Context, resp *http.Response) error {
	return a.onForbidden(ctx, resp)
}

// Login runs the configured grant now (e.g. `agentctl auth login`),
// discovering from the server's 401 challenge, and stores the credentials.
func (a *Authorizer) Login(ctx context.Context) error {
	return a.login(ctx)
}

// Key is the credential key in use, known after discovery (ok false before).
func (a *Authorizer) Key() (k Key, ok bool) {
	a.mu.Lock()
	d := a.disc
	a.mu.Unlock()
	if d == nil {
		return Key{}, false
	}
	return a.keyOf(d), true
}

func (a *Authorizer) observe(ctx context.Context, s Step) {
	if a.obs != nil {
		if s.Resource == "" {
			s.Resource = a.resource
		}
		a.obs.AuthStep(ctx, s)
	}
}
