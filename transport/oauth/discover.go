package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Bounds on what the authorization servers and resources send.
const (
	maxMetadataBytes = 1 << 20 // a metadata, registration or token response
	maxRedirects     = 5       // redirects followed by a metadata fetch
	httpTimeout      = 30 * time.Second
	maxStepUps       = 2 // insufficient_scope re-authorizations of one request (3 authorizations in all)
)

// challenge is what a WWW-Authenticate header says.
type challenge struct {
	scheme           string // "bearer" or "dpop"
	resourceMetadata string
	scopes           []string
	err              string
}

// parseChallenge reads the Bearer (or DPoP) challenge of h's
// WWW-Authenticate headers; a malformed header gives an empty challenge.
func parseChallenge(h http.Header) challenge {
	cs, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if err != nil {
		return challenge{}
	}
	for _, c := range cs {
		if c.Scheme != "bearer" && c.Scheme != "dpop" {
			continue
		}
		return challenge{scheme: c.Scheme, resourceMetadata: c.Params["resource_metadata"],
			scopes: strings.Fields(c.Params["scope"]), err: c.Params["error"]}
	}
	return challenge{}
}

// resourceMeta is RFC 9728 protected resource metadata (the fields used).
type resourceMeta struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// serverMeta is RFC 8414 / OIDC authorization server metadata (the fields used).
type serverMeta struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	ScopesSupported                   []string `json:"scopes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	TokenEndpointAuthSigningAlgs      []string `json:"token_endpoint_auth_signing_alg_values_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
	DPoPSigningAlgs                   []string `json:"dpop_signing_alg_values_supported"`
}

// canonicalResource is serverURL without fragment (RFC 8707 §2: no
// fragment; the path is kept, the query dropped), its scheme and host lower
// case. Its scheme must be https, or http on a loopback host.
func canonicalResource(serverURL string) (string, error) {
	u, err := url.Parse(serverURL)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("%w: server URL %q is not an absolute URL", ErrMetadata, serverURL)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.Fragment, u.RawFragment, u.RawQuery = "", "", ""
	if err := checkSecure(u.String()); err != nil {
		return "", err
	}
	return u.String(), nil
}

// isLoopback reports whether host (no port) is a loopback name or address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkSecure refuses a URL that is neither https nor http on a loopback
// host (tokens, codes and secrets travel to it).
func checkSecure(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrMetadata, raw)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("%w: %s (only https, or http on a loopback address)", ErrInsecure, withoutQuery(raw))
}

// withoutQuery is raw without query and fragment, for errors and Steps.
func withoutQuery(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.RawQuery, u.Fragment, u.RawFragment, u.User = "", "", "", nil
	return u.String()
}

// errNotFound: a metadata URL answered 4xx (try the next one).
var errNotFound = errors.New("not found")

// getJSON GETs raw (https or loopback http), bounded in size and redirects,
// and decodes a 200 into v. A 4xx is errNotFound.
func (a *Authorizer) getJSON(ctx context.Context, raw string, v any) error {
	if err := checkSecure(raw); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrMetadata, withoutQuery(raw), err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("MCP-Protocol-Version", "2025-11-25")
	resp, err := a.client().Do(req)
	if err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrMetadata, withoutQuery(raw), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 && resp.StatusCode < 500 {
		return fmt.Errorf("%w: GET %s: http %d", errNotFound, withoutQuery(raw), resp.StatusCode)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: http %d", ErrMetadata, withoutQuery(raw), resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrMetadata, withoutQuery(raw), err)
	}
	if len(body) > maxMetadataBytes {
		return fmt.Errorf("%w: GET %s: document larger than %d bytes", ErrMetadata, withoutQuery(raw), maxMetadataBytes)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: GET %s: %w", ErrMetadata, withoutQuery(raw), err)
	}
	return nil
}

// client is the HTTP client of metadata, registration and token requests:
// the configured one (the caller's network policy) or a default, with
// redirects bounded, every hop https or loopback http (then the configured
// client's own redirect rule), and a timeout when it has none.
func (a *Authorizer) client() *http.Client {
	c := &http.Client{}
	if a.cfg.HTTPClient != nil {
		*c = *a.cfg.HTTPClient
	}
	if c.Timeout == 0 {
		c.Timeout = httpTimeout
	}
	inner := c.CheckRedirect
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("%w: more than %d redirects", ErrMetadata, maxRedirects)
		}
		if err := checkSecure(req.URL.String()); err != nil {
			return err
		}
		if inner != nil {
			return inner(req, via)
		}
		return nil
	}
	return c
}

// resourceMetaURLs are the protected resource metadata URLs to try: the
// challenge's, else the path-inserted well-known URL, then the root one
// (RFC 9728 §3.1, MCP 2025-11-25).
func resourceMetaURLs(resource, fromChallenge string) []string {
	if fromChallenge != "" {
		return []string{fromChallenge}
	}
	u, _ := url.Parse(resource)
	var urls []string
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		urls = append(urls, u.Scheme+"://"+u.Host+"/.well-known/oauth-protected-resource"+p)
	}
	return append(urls, u.Scheme+"://"+u.Host+"/.well-known/oauth-protected-resource")
}

// serverMetaURLs are the authorization server metadata URLs of issuer in
// the MCP order: RFC 8414 then OIDC, path-inserted, then OIDC path-appended.
func serverMetaURLs(issuer string) []string {
	u, err := url.Parse(issuer)
	if err != nil {
		return nil
	}
	base := u.Scheme + "://" + u.Host
	p := strings.Trim(u.EscapedPath(), "/")
	if p == "" {
		return []string{base + "/.well-known/oauth-authorization-server", base + "/.well-known/openid-configuration"}
	}
	return []string{
		base + "/.well-known/oauth-authorization-server/" + p,
		base + "/.well-known/openid-configuration/" + p,
		base + "/" + p + "/.well-known/openid-configuration",
	}
}

// resourceCovers reports whether the metadata's resource identifies the
// server at resource: the same origin, and a path that is the server's or
// a prefix of it on a segment boundary.
func resourceCovers(metaResource, resource string) bool {
	m, err1 := url.Parse(metaResource)
	r, err2 := url.Parse(resource)
	if err1 != nil || err2 != nil || !strings.EqualFold(m.Scheme, r.Scheme) || !strings.EqualFold(m.Host, r.Host) {
		return false
	}
	mp, rp := strings.TrimSuffix(m.Path, "/"), strings.TrimSuffix(r.Path, "/")
	return mp == rp || strings.HasPrefix(rp, mp+"/")
}

// discovery is what discover learnt about a resource.
type discovery struct {
	prm      resourceMeta
	prmURL   string
	asm      serverMeta
	asmURL   string
	resource string // the resource parameter sent (the PRM's resource)
}

// discover finds the resource's protected resource metadata and its first
// authorization server's metadata, validating both.
func (a *Authorizer) discover(ctx context.Context, ch challenge) (*discovery, error) {
	d := &discovery{}
	var errs []error
	for _, u := range resourceMetaURLs(a.resource, ch.resourceMetadata) {
		var prm resourceMeta
		if err := a.getJSON(ctx, u, &prm); err != nil {
			errs = append(errs, err)
			continue
		}
		d.prm, d.prmURL = prm, u
		break
	}
	if d.prmURL == "" {
		return nil, fmt.Errorf("%w: no protected resource metadata for %s: %w", ErrMetadata, a.resource, errors.Join(errs...))
	}
	if !resourceCovers(d.prm.Resource, a.resource) {
		return nil, fmt.Errorf("%w: protected resource metadata at %s names resource %q, not this server %s",
			ErrMetadata, withoutQuery(d.prmURL), d.prm.Resource, a.resource)
	}
	d.resource = d.prm.Resource
	if len(d.prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("%w: protected resource metadata at %s lists no authorization server", ErrMetadata, withoutQuery(d.prmURL))
	}
	a.observe(ctx, Step{Kind: StepResourceMeta, URL: withoutQuery(d.prmURL), Resource: d.resource, Scopes: d.prm.ScopesSupported})
	issuer := d.prm.AuthorizationServers[0]
	if err := checkSecure(issuer); err != nil {
		return nil, err
	}
	errs = nil
	for _, u := range serverMetaURLs(issuer) {
		var asm serverMeta
		if err := a.getJSON(ctx, u, &asm); err != nil {
			if !errors.Is(err, errNotFound) {
				return nil, err
			}
			errs = append(errs, err)
			continue
		}
		d.asm, d.asmURL = asm, u
		break
	}
	if d.asmURL == "" {
		return nil, fmt.Errorf("%w: no authorization server metadata for %s: %w", ErrMetadata, issuer, errors.Join(errs...))
	}
	if err := validateServerMeta(&d.asm, issuer, d.asmURL, a.cfg.Grant == GrantAuthorizationCode); err != nil {
		return nil, err
	}
	a.observe(ctx, Step{Kind: StepServerMeta, Issuer: d.asm.Issuer, URL: withoutQuery(d.asmURL), Resource: d.resource, Scopes: d.asm.ScopesSupported})
	return d, nil
}

// validateServerMeta refuses metadata whose issuer is not the one its URL
// was built from (RFC 8414 §3.3), without PKCE S256 (when pkce, the
// authorization-code grant), or with an endpoint that is neither https nor
// loopback http.
func validateServerMeta(m *serverMeta, issuer, from string, pkce bool) error {
	if m.Issuer != issuer && strings.TrimSuffix(m.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
		return fmt.Errorf("%w: authorization server metadata at %s names issuer %q, not %q", ErrMetadata, withoutQuery(from), m.Issuer, issuer)
	}
	if pkce && !slices.Contains(m.CodeChallengeMethodsSupported, "S256") {
		return fmt.Errorf("%w: authorization server %s does not support PKCE S256 (code_challenge_methods_supported %v)", ErrMetadata, issuer, m.CodeChallengeMethodsSupported)
	}
	if m.TokenEndpoint == "" {
		return fmt.Errorf("%w: authorization server %s has no token_endpoint", ErrMetadata, issuer)
	}
	for _, e := range []string{m.AuthorizationEndpoint, m.TokenEndpoint, m.RegistrationEndpoint} {
		if e == "" {
			continue
		}
		if err := checkSecure(e); err != nil {
			return err
		}
	}
	return nil
}
