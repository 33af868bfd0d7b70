package oauth

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"
)

// register chooses the client in the spec's order: pre-registered (the
// configuration), a Client ID Metadata Document (when configured and the
// authorization server supports it), a client registered earlier (in cur),
// else Dynamic Client Registration (RFC 7591) at the registration endpoint.
func (a *Authorizer) register(ctx context.Context, d *discovery, cur *Credentials, redirectURI string) (*Credentials, error) {
	step := Step{Kind: StepRegistered, Issuer: d.asm.Issuer, Resource: d.resource}
	switch {
	case a.cfg.ClientID != "":
		step.ClientID, step.Method = a.cfg.ClientID, "pre-registered"
		a.observe(ctx, step)
		return &Credentials{ClientID: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret}, nil
	case a.cfg.ClientMetadataURL != "" && d.asm.ClientIDMetadataDocumentSupported:
		step.ClientID, step.Method = a.cfg.ClientMetadataURL, "cimd"
		a.observe(ctx, step)
		return &Credentials{ClientID: a.cfg.ClientMetadataURL}, nil
	case cur != nil && cur.ClientID != "":
		return &Credentials{ClientID: cur.ClientID, ClientSecret: cur.ClientSecret}, nil
	case d.asm.RegistrationEndpoint == "":
		return nil, fmt.Errorf("%w: authorization server %s offers no client registration (no registration_endpoint, no client id metadata documents): configure a client id",
			ErrNotAuthorized, d.asm.Issuer)
	}
	c, err := a.dynamicRegistration(ctx, d, redirectURI)
	if err != nil {
		return nil, err
	}
	step.ClientID, step.Method = c.ClientID, "dcr"
	a.observe(ctx, step)
	return c, nil
}

// registrationRequest is the RFC 7591 client metadata sent.
type registrationRequest struct {
	ClientName              string   `json:"client_name"`
	RedirectURIs            []string `json:"redirect_uris"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method"`
	ApplicationType         string   `json:"application_type"`
	Scope                   string   `json:"scope,omitempty"`
}

// dynamicRegistration registers a native client with the loopback redirect.
func (a *Authorizer) dynamicRegistration(ctx context.Context, d *discovery, redirectURI string) (*Credentials, error) {
	method := "client_secret_basic"
	switch m := d.asm.TokenEndpointAuthMethodsSupported; {
	case slices.Contains(m, "none"):
		method = "none"
	case len(m) > 0 && !slices.Contains(m, "client_secret_basic") && slices.Contains(m, "client_secret_post"):
		method = "client_secret_post"
	}
	name := a.cfg.ClientName
	if name == "" {
		name = "agentctl"
	}
	body, _ := json.Marshal(registrationRequest{ClientName: name, RedirectURIs: []string{redirectURI},
		GrantTypes: []string{"authorization_code", "refresh_token"}, ResponseTypes: []string{"code"},
		TokenEndpointAuthMethod: method, ApplicationType: "native"})
	endpoint := withoutQuery(d.asm.RegistrationEndpoint)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.asm.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("oauth: register at %s: %w", endpoint, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := a.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauth: register at %s: %w", endpoint, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil || len(raw) > maxMetadataBytes {
		return nil, fmt.Errorf("%w: register at %s: response unreadable or larger than %d bytes", ErrNotAuthorized, endpoint, maxMetadataBytes)
	}
	var out struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
		Error        string `json:"error"`
	}
	_ = json.Unmarshal(raw, &out)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: register at %s: http %d error %q", ErrNotAuthorized, endpoint, resp.StatusCode, out.Error)
	}
	if out.ClientID == "" {
		return nil, fmt.Errorf("%w: register at %s: the response has no client_id", ErrNotAuthorized, endpoint)
	}
	return &Credentials{ClientID: out.ClientID, ClientSecret: out.ClientSecret}, nil
}

// tokenContext carries the HTTP client of token requests to x/oauth2: the
// bounded client, with the RFC 8707 resource added to every token request
// (x/oauth2's refresh takes no extra parameter).
func (a *Authorizer) tokenContext(ctx context.Context, d *discovery) context.Context {
	c := *a.client()
	base := c.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	c.Transport = resourceParam{base: base, tokenURL: d.asm.TokenEndpoint, resource: d.resource}
	return context.WithValue(ctx, oauth2.HTTPClient, &c)
}

// resourceParam adds resource= to form POSTs to the token endpoint that lack it.
type resourceParam struct {
	base               http.RoundTripper
	tokenURL, resource string
}

// RoundTrip implements http.RoundTripper.
func (r resourceParam) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.String() != r.tokenURL || req.Body == nil ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return r.base.RoundTrip(req)
	}
	raw, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(raw))
	if err != nil {
		return nil, fmt.Errorf("oauth: token request body: %w", err)
	}
	if form.Get("resource") == "" {
		form.Set("resource", r.resource)
	}
	enc := form.Encode()
	r2 := req.Clone(req.Context())
	r2.Body = io.NopCloser(strings.NewReader(enc))
	r2.ContentLength = int64(len(enc))
	r2.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(enc)), nil }
	return r.base.RoundTrip(r2)
}
