package spec

import (
	"net/url"
	"slices"
	"strings"
)

// AuthSpec is how agentctl authorizes itself to a url server (issue 31):
// MCP's OAuth 2.1 client. Secrets in it are secret references under the
// workflow's secret policy, resolved when a token is needed and never
// recorded; the tokens themselves live in the database's credentials
// table (sealed), never in the log.
type AuthSpec struct {
	OAuth *OAuthSpec `yaml:"oauth" json:"oauth,omitempty" jsonschema:"required" jsonschema_description:"MCP authorization (OAuth 2.1): discovery from the server's 401, a token per issuer kept sealed in the database."`
}

// OAuthSpec is one server's OAuth client configuration.
type OAuthSpec struct {
	ClientID          *EnvValueSpec  `yaml:"clientId" json:"clientId,omitempty" jsonschema_description:"A pre-registered client id: a literal or a secret reference {env: VAR} / {file: PATH}. Absent: clientMetadataUrl, else Dynamic Client Registration."`
	ClientSecret      *SecretRefSpec `yaml:"clientSecret" json:"clientSecret,omitempty" jsonschema_description:"The pre-registered client's secret: a secret reference."`
	ClientMetadataURL string         `yaml:"clientMetadataUrl" json:"clientMetadataUrl,omitempty" jsonschema:"minLength=1" jsonschema_description:"An https URL of this client's Client ID Metadata Document, used as its client id where the authorization server supports it."`
	Scopes            []string       `yaml:"scopes" json:"scopes,omitempty" jsonschema_description:"Scopes to request when the server's challenge names none (else the server's scopes_supported)."`
	Grant             string         `yaml:"grant" json:"grant,omitempty" jsonschema:"enum=authorization_code,enum=client_credentials,enum=jwt_bearer" jsonschema_description:"authorization_code (default: a user logs in once with agentctl auth login), client_credentials (headless: clientId with clientSecret or privateKey) or jwt_bearer (workload identity federation: the platform's token in assertion)."`
	Assertion         *SecretRefSpec `yaml:"assertion" json:"assertion,omitempty" jsonschema_description:"For grant jwt_bearer: the workload identity JWT (a secret reference, e.g. {file: /var/run/secrets/tokens/mcp}), read at every token request."`
	PrivateKey        *SecretRefSpec `yaml:"privateKey" json:"privateKey,omitempty" jsonschema_description:"A PEM private key (secret reference) for RFC 7523 private_key_jwt client authentication, instead of clientSecret."`
	PrivateKeyAlg     string         `yaml:"privateKeyAlg" json:"privateKeyAlg,omitempty" jsonschema:"enum=RS256,enum=PS256,enum=ES256,enum=ES384,enum=EdDSA" jsonschema_description:"The JWS algorithm of privateKey; default from the key type."`
	DPoP              bool           `yaml:"dpop" json:"dpop,omitempty" jsonschema_description:"Bind tokens to a key agentctl keeps per issuer (DPoP, RFC 9449)."`
}

// The grants of OAuthSpec.Grant.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantClientCredentials = "client_credentials"
	GrantJWTBearer         = "jwt_bearer"
)

// GrantOrDefault is the spec's grant, authorization_code when absent.
func (o *OAuthSpec) GrantOrDefault() string {
	if o.Grant == "" {
		return GrantAuthorizationCode
	}
	return o.Grant
}

var privateKeyAlgs = []string{"RS256", "PS256", "ES256", "ES384", "EdDSA"}

// auth checks a server's auth block.
func (c *checker) auth(sp string, s ServerSpec) {
	p := sp + ".auth"
	if s.Auth == nil {
		return
	}
	if s.IsStdio() {
		c.errf(p, "auth applies to url servers only; give a stdio server its secrets through env")
		return
	}
	o := s.Auth.OAuth
	if o == nil {
		c.errf(p, "auth needs oauth: {…}; it is the only kind")
		return
	}
	for _, h := range sortedNames(s.Headers) {
		if strings.EqualFold(h, "authorization") {
			c.errf(joinPath(sp+".headers", h), "an Authorization header and auth: oauth exclude each other; drop the header")
		}
	}
	p += ".oauth"
	if c.has(p+".grant") && !slices.Contains([]string{GrantAuthorizationCode, GrantClientCredentials, GrantJWTBearer}, o.Grant) {
		c.errf(p+".grant", "unknown grant %q; want authorization_code, client_credentials or jwt_bearer", o.Grant)
	}
	if o.Assertion != nil {
		c.secretRef(p+".assertion", *o.Assertion)
	}
	switch {
	case o.GrantOrDefault() == GrantJWTBearer && o.Assertion == nil:
		c.errf(p, "grant jwt_bearer needs assertion: the workload identity token, a secret reference")
	case o.GrantOrDefault() != GrantJWTBearer && o.Assertion != nil:
		c.errf(p+".assertion", "assertion is used only with grant jwt_bearer")
	}
	if o.ClientID != nil {
		switch {
		case o.ClientID.IsSecret():
			c.secretRef(p+".clientId", SecretRefSpec{Env: o.ClientID.Env, File: o.ClientID.File})
		case o.ClientID.Value == "":
			c.errf(p+".clientId", "clientId is empty; give the pre-registered client id, or leave clientId out")
		}
	}
	if o.ClientSecret != nil {
		c.secretRef(p+".clientSecret", *o.ClientSecret)
	}
	if o.PrivateKey != nil {
		c.secretRef(p+".privateKey", *o.PrivateKey)
	}
	if o.ClientSecret != nil && o.PrivateKey != nil {
		c.errf(p+".privateKey", "set clientSecret or privateKey, not both")
	}
	if (o.ClientSecret != nil || o.PrivateKey != nil) && o.ClientID == nil {
		c.errf(p, "a clientSecret or privateKey belongs to a pre-registered client: set clientId")
	}
	if c.has(p+".privateKeyAlg") && !slices.Contains(privateKeyAlgs, o.PrivateKeyAlg) {
		c.errf(p+".privateKeyAlg", "unknown privateKeyAlg %q; want one of %s", o.PrivateKeyAlg, strings.Join(privateKeyAlgs, ", "))
	}
	if o.PrivateKeyAlg != "" && o.PrivateKey == nil {
		c.errf(p+".privateKeyAlg", "privateKeyAlg without privateKey")
	}
	if o.GrantOrDefault() == GrantClientCredentials && (o.ClientID == nil || (o.ClientSecret == nil && o.PrivateKey == nil)) {
		c.errf(p, "grant client_credentials needs clientId and one of clientSecret or privateKey")
	}
	if o.ClientMetadataURL != "" {
		u, err := url.Parse(o.ClientMetadataURL)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			c.errf(p+".clientMetadataUrl", "clientMetadataUrl %q must be an https URL with a path", o.ClientMetadataURL)
		}
	}
	for i, sc := range o.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \t\"\\") {
			c.errf(indexPath(p+".scopes", i), "scope %q must be non-empty, without spaces, quotes or backslashes", sc)
		}
	}
}

// authRefs lists the secret references of an auth block with their paths
// (below p, the server's path) and what each is, for UnsetSecrets.
func (o *OAuthSpec) authRefs(p string) []authRef {
	if o == nil {
		return nil
	}
	p += ".auth.oauth"
	var out []authRef
	if o.ClientID != nil && o.ClientID.IsSecret() {
		out = append(out, authRef{p + ".clientId", "clientId", SecretRefSpec{Env: o.ClientID.Env, File: o.ClientID.File}})
	}
	if o.ClientSecret != nil {
		out = append(out, authRef{p + ".clientSecret", "clientSecret", *o.ClientSecret})
	}
	if o.PrivateKey != nil {
		out = append(out, authRef{p + ".privateKey", "privateKey", *o.PrivateKey})
	}
	if o.Assertion != nil {
		out = append(out, authRef{p + ".assertion", "assertion", *o.Assertion})
	}
	return out
}

type authRef struct {
	path, what string
	ref        SecretRefSpec
}
