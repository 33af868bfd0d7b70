package oauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// expiryMargin: a token this close to its expiry is refreshed before use.
const expiryMargin = 30 * time.Second

// authorize sets req's Authorization header from the credentials in use,
// refreshing them first when they have expired and can be refreshed.
func (a *Authorizer) authorize(ctx context.Context, req *http.Request) error {
	a.mu.Lock()
	cur, d := a.cur, a.disc
	a.mu.Unlock()
	if cur == nil || cur.AccessToken == "" {
		return nil
	}
	if expired(cur) && cur.RefreshToken != "" && d != nil {
		next, err := a.store.Update(ctx, a.keyOf(d), func(c *Credentials) (*Credentials, error) {
			if c != nil && c.AccessToken != cur.AccessToken && !expired(c) {
				return c, nil // another worker refreshed
			}
			if c == nil || c.RefreshToken == "" {
				return c, nil
			}
			return a.refresh(ctx, d, c)
		})
		if err == nil && next != nil {
			a.setCurrent(d, next)
			cur = next
		}
	}
	req.Header.Set("Authorization", tokenType(cur)+" "+cur.AccessToken)
	return nil
}

func expired(c *Credentials) bool {
	return !c.Expiry.IsZero() && time.Now().Add(expiryMargin).After(c.Expiry)
}

func tokenType(c *Credentials) string {
	if strings.EqualFold(c.TokenType, "dpop") {
		return "DPoP"
	}
	return "Bearer"
}

func (a *Authorizer) setCurrent(d *discovery, c *Credentials) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.disc, a.cur = d, c
	if c != nil {
		a.scopes = union(a.scopes, c.Scopes)
	}
}

// keyOf is the credential key under d: the issuer, the configured client
// (a pre-registered id or a metadata document URL; empty for a client
// registered dynamically, whose id is then in the Credentials) and the
// resource.
func (a *Authorizer) keyOf(d *discovery) Key {
	return Key{Issuer: d.asm.Issuer, ClientID: a.configuredClientID(d), Resource: d.resource}
}

func (a *Authorizer) configuredClientID(d *discovery) string {
	if a.cfg.ClientID != "" {
		return a.cfg.ClientID
	}
	if a.cfg.ClientMetadataURL != "" && d.asm.ClientIDMetadataDocumentSupported {
		return a.cfg.ClientMetadataURL
	}
	return ""
}

// sentToken is the access token req carried, "" when none.
func sentToken(req *http.Request) string {
	if req == nil {
		return ""
	}
	_, tok, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	return tok
}

// onUnauthorized rediscovers (the server may have moved to another
// authorization server), then uses credentials another worker stored,
// else refreshes, else runs the grant.
func (a *Authorizer) onUnauthorized(ctx context.Context, resp *http.Response) error {
	ch := parseChallenge(resp.Header)
	a.observe(ctx, Step{Kind: StepChallenge, Scopes: ch.scopes, Detail: "401 " + ch.err, URL: withoutQuery(ch.resourceMetadata)})
	d, err := a.discover(ctx, ch)
	if err != nil {
		return err
	}
	refused := sentToken(resp.Request)
	scopes := a.initialScopes(ch, d)
	next, err := a.store.Update(ctx, a.keyOf(d), func(cur *Credentials) (*Credentials, error) {
		if cur != nil && cur.AccessToken != "" && cur.AccessToken != refused && !expired(cur) && covers(cur.Scopes, ch.scopes) {
			return cur, nil // stored by an earlier login or another worker
		}
		if !a.headless() && cur != nil && cur.RefreshToken != "" && covers(cur.Scopes, ch.scopes) { // a refresh keeps the scopes; a headless grant just asks again
			if c, err := a.refresh(ctx, d, cur); err == nil {
				return c, nil
			}
		}
		return a.grant(ctx, d, cur, scopes)
	})
	if err != nil {
		return err
	}
	a.setCurrent(d, next)
	return nil
}

// onForbidden steps up on insufficient_scope: the challenge's scopes added
// to those requested so far, a new grant.
func (a *Authorizer) onForbidden(ctx context.Context, resp *http.Response) error {
	ch := parseChallenge(resp.Header)
	if ch.err != "insufficient_scope" {
		return fmt.Errorf("%w: http 403 (error %q)", ErrNotAuthorized, ch.err)
	}
	d, err := a.discover(ctx, ch)
	if err != nil {
		return err
	}
	a.mu.Lock()
	scopes := union(a.scopes, ch.scopes)
	a.mu.Unlock()
	a.observe(ctx, Step{Kind: StepStepUp, Issuer: d.asm.Issuer, Scopes: scopes, Detail: "403 insufficient_scope"})
	next, err := a.store.Update(ctx, a.keyOf(d), func(cur *Credentials) (*Credentials, error) {
		return a.grant(ctx, d, cur, scopes)
	})
	if err != nil {
		return err
	}
	a.setCurrent(d, next)
	return nil
}

// login discovers from the server's challenge and runs the grant.
func (a *Authorizer) login(ctx context.Context) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.resource, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	if err != nil {
		return fmt.Errorf("oauth: login: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := a.client().Do(req)
	if err != nil {
		return fmt.Errorf("oauth: login: %s: %w", a.resource, err)
	}
	resp.Body.Close()
	if a.headless() { // no user: a stored token still valid is kept, as on a 401
		resp.Request = nil // no token was refused
		return a.onUnauthorized(ctx, resp)
	}
	ch := parseChallenge(resp.Header)
	d, err := a.discover(ctx, ch)
	if err != nil {
		return err
	}
	next, err := a.store.Update(ctx, a.keyOf(d), func(cur *Credentials) (*Credentials, error) {
		return a.grant(ctx, d, cur, a.initialScopes(ch, d))
	})
	if err != nil {
		return err
	}
	a.setCurrent(d, next)
	return nil
}

// initialScopes: the challenge's scopes (plus the configured ones), else
// the configured ones, else the resource's scopes_supported, else none;
// offline_access added when the authorization server advertises it.
func (a *Authorizer) initialScopes(ch challenge, d *discovery) []string {
	var s []string
	switch {
	case len(ch.scopes) > 0:
		s = union(ch.scopes, a.cfg.Scopes)
	case len(a.cfg.Scopes) > 0:
		s = slices.Clone(a.cfg.Scopes)
	default:
		s = slices.Clone(d.prm.ScopesSupported)
	}
	a.mu.Lock()
	s = union(a.scopes, s)
	a.mu.Unlock()
	if len(s) > 0 && a.cfg.Grant == GrantAuthorizationCode && slices.Contains(d.asm.ScopesSupported, "offline_access") {
		s = union(s, []string{"offline_access"})
	}
	return s
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// covers reports whether held includes every scope of want.
func covers(held, want []string) bool {
	for _, s := range want {
		if !slices.Contains(held, s) {
			return false
		}
	}
	return true
}

// grant obtains new credentials with the configured grant: the headless
// ones (client credentials, jwt-bearer) at the token endpoint, the
// authorization code through the user, registering the client first when
// needed. cur (possibly nil) keeps a dynamically registered client.
func (a *Authorizer) grant(ctx context.Context, d *discovery, cur *Credentials, scopes []string) (*Credentials, error) {
	switch a.cfg.Grant {
	case GrantAuthorizationCode:
	case GrantClientCredentials, GrantJWTBearer:
		return a.headlessGrant(ctx, d, scopes)
	default:
		return nil, fmt.Errorf("oauth: unknown grant %q", a.cfg.Grant)
	}
	if a.cfg.OpenBrowser == nil {
		return nil, fmt.Errorf("%w for %s (authorization server %s)", ErrLoginRequired, a.resource, d.asm.Issuer)
	}
	cb, err := a.listen(ctx)
	if err != nil {
		return nil, err
	}
	defer cb.close()
	client, err := a.register(ctx, d, cur, cb.redirectURI)
	if err != nil {
		return nil, err
	}
	tok, err := a.authorizationCode(ctx, d, client, cb, scopes)
	if err != nil {
		return nil, err
	}
	c := credentialsOf(tok, client, scopes)
	a.observe(ctx, Step{Kind: StepToken, Issuer: d.asm.Issuer, ClientID: c.ClientID, Scopes: c.Scopes, Resource: d.resource,
		Detail: "authorization_code", Method: authMethod(d, client)})
	return c, nil
}

// credentialsOf keeps tok and the registered client.
func credentialsOf(tok *oauth2.Token, client *Credentials, requested []string) *Credentials {
	c := &Credentials{ClientID: client.ClientID, ClientSecret: client.ClientSecret, AccessToken: tok.AccessToken,
		RefreshToken: tok.RefreshToken, TokenType: tok.TokenType, Expiry: tok.Expiry, Scopes: slices.Clone(requested)}
	if s, ok := tok.Extra("scope").(string); ok && s != "" {
		c.Scopes = strings.Fields(s)
	}
	return c
}

// authorizationCode sends the user to the authorization endpoint (PKCE
// S256, state, resource), waits for the loopback callback, checks its state
// and iss (RFC 9207), and exchanges the code.
func (a *Authorizer) authorizationCode(ctx context.Context, d *discovery, client *Credentials, cb *callback, scopes []string) (*oauth2.Token, error) {
	if d.asm.AuthorizationEndpoint == "" {
		return nil, fmt.Errorf("%w: authorization server %s has no authorization_endpoint", ErrMetadata, d.asm.Issuer)
	}
	conf := a.oauth2Config(d, client, cb.redirectURI, scopes)
	verifier, state := oauth2.GenerateVerifier(), oauth2.GenerateVerifier()
	authURL := conf.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", d.resource))
	a.observe(ctx, Step{Kind: StepAuthorize, Issuer: d.asm.Issuer, ClientID: client.ClientID, Scopes: scopes, URL: withoutQuery(d.asm.AuthorizationEndpoint)})
	cb.expect(state)
	if err := a.cfg.OpenBrowser(ctx, authURL); err != nil {
		return nil, fmt.Errorf("oauth: open the authorization URL of %s: %w", withoutQuery(d.asm.AuthorizationEndpoint), err)
	}
	res, err := cb.wait(ctx)
	if err != nil {
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(res.state), []byte(state)) != 1 {
		return nil, fmt.Errorf("%w: the authorization response's state does not match the request's", ErrNotAuthorized)
	}
	if err := checkIss(res, d); err != nil {
		return nil, err
	}
	if res.err != "" {
		return nil, fmt.Errorf("%w: authorization server %s answered error %q", ErrNotAuthorized, d.asm.Issuer, res.err)
	}
	if res.code == "" {
		return nil, fmt.Errorf("%w: the authorization response carries no code", ErrNotAuthorized)
	}
	tok, err := conf.Exchange(a.tokenContext(ctx, d), res.code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", d.resource))
	if err != nil {
		return nil, tokenError(d, err)
	}
	return tok, nil
}

// checkIss validates the authorization response's iss (RFC 9207): when
// present it must equal the metadata's issuer exactly; when the server
// advertises it, it must be present.
func checkIss(res callbackResult, d *discovery) error {
	switch {
	case res.hasIss && res.iss != d.asm.Issuer:
		return fmt.Errorf("%w: the authorization response's iss %q is not the issuer %q", ErrNotAuthorized, res.iss, d.asm.Issuer)
	case !res.hasIss && d.asm.IssParameterSupported:
		return fmt.Errorf("%w: authorization server %s advertises the iss parameter but its response has none", ErrNotAuthorized, d.asm.Issuer)
	}
	return nil
}

// refresh spends cur's refresh token; the rotated one (or the old one when
// none is returned) is in the result, which Update commits before use.
func (a *Authorizer) refresh(ctx context.Context, d *discovery, cur *Credentials) (*Credentials, error) {
	client := a.clientOf(cur)
	conf := a.oauth2Config(d, client, "", nil)
	tok, err := conf.TokenSource(a.tokenContext(ctx, d), &oauth2.Token{RefreshToken: cur.RefreshToken}).Token()
	if err != nil {
		return nil, tokenError(d, err)
	}
	c := credentialsOf(tok, client, cur.Scopes)
	a.observe(ctx, Step{Kind: StepRefreshed, Issuer: d.asm.Issuer, ClientID: c.ClientID, Scopes: c.Scopes, Resource: d.resource})
	return c, nil
}

// clientOf is the client of cur: the configured one, else the registered one.
func (a *Authorizer) clientOf(cur *Credentials) *Credentials {
	if a.cfg.ClientID != "" {
		return &Credentials{ClientID: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret}
	}
	return &Credentials{ClientID: cur.ClientID, ClientSecret: cur.ClientSecret}
}

// tokenError is err without the token endpoint's response body.
func tokenError(d *discovery, err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("%w: token endpoint %s answered http %d error %q", ErrNotAuthorized, withoutQuery(d.asm.TokenEndpoint), status, re.ErrorCode)
	}
	return fmt.Errorf("oauth: token endpoint %s: %w", withoutQuery(d.asm.TokenEndpoint), err)
}

// oauth2Config is the x/oauth2 configuration of client at d.
func (a *Authorizer) oauth2Config(d *discovery, client *Credentials, redirect string, scopes []string) *oauth2.Config {
	style, secret := oauth2.AuthStyleInParams, client.ClientSecret
	switch authMethod(d, client) {
	case "client_secret_basic":
		style = oauth2.AuthStyleInHeader
	case "none":
		secret = ""
	}
	return &oauth2.Config{ClientID: client.ClientID, ClientSecret: secret, RedirectURL: redirect, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: d.asm.AuthorizationEndpoint, TokenURL: d.asm.TokenEndpoint, AuthStyle: style}}
}

// authMethod is the token endpoint authentication: none for a client
// without secret, else client_secret_basic unless the server supports only
// client_secret_post (RFC 8414's default is basic).
func authMethod(d *discovery, client *Credentials) string {
	switch m := d.asm.TokenEndpointAuthMethodsSupported; {
	case client.ClientSecret == "":
		return "none"
	case len(m) == 0 || slices.Contains(m, "client_secret_basic"):
		return "client_secret_basic"
	case slices.Contains(m, "client_secret_post"):
		return "client_secret_post"
	case slices.Contains(m, "none"):
		return "none"
	}
	return "client_secret_basic"
}
