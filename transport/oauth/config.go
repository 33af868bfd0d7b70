// Package oauth is agentctl's MCP authorization client: discovery of the
// protected resource and its authorization server (RFC 9728, RFC 8414,
// OpenID Connect discovery), client registration (pre-registered, Client ID
// Metadata Documents, Dynamic Client Registration), the authorization-code
// grant with PKCE S256 on a loopback redirect, refresh, step-up on
// insufficient_scope, and durable credentials through a [Store]. The
// transport asks an [Authorizer] for a request's headers and hands it every
// 401 and 403; no secret ever reaches an [Observer], an error or a log.
package oauth

import (
	"context"
	"errors"
	"net/http"
)

// Grant names the OAuth grant a server's credentials come from.
type Grant string

// The grants.
const (
	GrantAuthorizationCode Grant = "authorization_code"
	GrantClientCredentials Grant = "client_credentials"
)

// Config is one server's OAuth client configuration. Secret values
// (ClientSecret, PrivateKey) are resolved by the caller from secret
// references just before use and never logged.
type Config struct {
	// ClientID is a pre-registered client id; empty: ClientMetadataURL, else
	// Dynamic Client Registration.
	ClientID string
	// ClientSecret is the pre-registered client's secret (confidential
	// client); empty for a public client.
	ClientSecret string
	// ClientMetadataURL is an https URL of this client's Client ID Metadata
	// Document, used as its client_id when the AS supports it.
	ClientMetadataURL string
	// Scopes requested when the challenge names none (else scopes_supported,
	// else none).
	Scopes []string
	// Grant is the grant to use; empty: authorization_code.
	Grant Grant
	// PrivateKey is a PEM private key for RFC 7523 private_key_jwt client
	// authentication (client credentials).
	PrivateKey []byte
	// PrivateKeyAlg is the JWS algorithm of PrivateKey (e.g. RS256, ES256);
	// empty: chosen from the key type.
	PrivateKeyAlg string
	// DPoP binds tokens to a per-issuer key (RFC 9449).
	DPoP bool
	// RedirectURI is the loopback redirect; empty: http://127.0.0.1:PORT/callback
	// on a random port. A non-loopback redirect is refused.
	RedirectURI string
	// OpenBrowser shows the authorization URL to the user (e.g. runs
	// $BROWSER); nil: the authorization-code grant is not interactive and a
	// missing login is ErrLoginRequired.
	OpenBrowser func(ctx context.Context, url string) error
	// HTTPClient makes the metadata, registration and token requests: the
	// caller's client under its network policy (destinations checked at
	// connect time, e.g. transport.PolicyClient); nil: any destination
	// that is https or loopback http. Either way redirects are bounded,
	// each hop https or loopback http, and a timeout applies.
	HTTPClient *http.Client
	// ClientName is the client_name registered (DCR) ; empty: "agentctl".
	ClientName string
}

// StepKind names one auth step reported to an Observer.
type StepKind string

// The auth steps.
const (
	StepChallenge    StepKind = "challenge"     // a 401/403 with WWW-Authenticate parsed
	StepResourceMeta StepKind = "resource_meta" // protected resource metadata fetched
	StepServerMeta   StepKind = "server_meta"   // authorization server metadata fetched
	StepRegistered   StepKind = "registered"    // client registered (DCR) or chosen (pre-registered, CIMD)
	StepAuthorize    StepKind = "authorize"     // authorization URL opened
	StepToken        StepKind = "token"         // token obtained
	StepRefreshed    StepKind = "refreshed"     // token refreshed
	StepStepUp       StepKind = "step_up"       // insufficient_scope: more scopes requested
)

// Step is one auth step: what happened, against which issuer and resource.
// It carries no secret (no token, code, verifier, state or client secret).
type Step struct {
	Kind     StepKind
	Issuer   string
	Resource string
	ClientID string   // a client id is an identifier, not a secret
	Scopes   []string // requested or granted scopes
	URL      string   // the metadata or endpoint URL involved, without query
	Method   string   // registration method (pre-registered, cimd, dcr) or token endpoint auth method
	Detail   string
}

// Observer receives every auth step; D2 records them as events.
type Observer interface {
	AuthStep(ctx context.Context, s Step)
}

// ObserverFunc adapts a function to an Observer.
type ObserverFunc func(ctx context.Context, s Step)

// AuthStep calls f.
func (f ObserverFunc) AuthStep(ctx context.Context, s Step) { f(ctx, s) }

// Errors callers branch on.
var (
	// ErrLoginRequired: the authorization-code grant needs a user and no
	// browser hook is configured (run `agentctl auth login`).
	ErrLoginRequired = errors.New("oauth: login required")
	// ErrNotAuthorized: the server's challenge could not be answered (a 403
	// that is not insufficient_scope, or the step-up limit reached).
	ErrNotAuthorized = errors.New("oauth: not authorized")
	// ErrInsecure: a non-loopback http endpoint or redirect was refused.
	ErrInsecure = errors.New("oauth: insecure endpoint refused")
	// ErrMetadata: discovery failed or metadata was refused (issuer
	// mismatch, no S256, resource mismatch, too large).
	ErrMetadata = errors.New("oauth: metadata refused")
)
