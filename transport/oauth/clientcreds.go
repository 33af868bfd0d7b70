package oauth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Client credentials (the MCP extension
// io.modelcontextprotocol/oauth-client-credentials): a headless client
// authenticates itself at the token endpoint, with its secret
// (client_secret_basic or client_secret_post, from the server's metadata)
// or with an RFC 7523 private_key_jwt assertion signed by its private key
// (recommended: no shared secret). There is no user and no refresh token:
// a 401 obtains a new token.

// GrantJWTBearer is RFC 7523's JWT-bearer authorization grant, used for
// workload identity federation (the MCP extension io.modelcontextprotocol/auth/wif):
// the platform's workload JWT is the grant; no client secret.
const GrantJWTBearer Grant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// jwtBearerAssertion is RFC 7523's client_assertion_type.
const jwtBearerAssertion = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// assertionLifetime bounds a client assertion's validity.
const assertionLifetime = 5 * time.Minute

// headless reports a grant without a user: client credentials, jwt-bearer.
// It has no refresh: a 401 obtains a new token.
func (a *Authorizer) headless() bool {
	return a.cfg.Grant == GrantClientCredentials || a.cfg.Grant == GrantJWTBearer
}

// headlessGrant obtains a token with the configured headless grant.
func (a *Authorizer) headlessGrant(ctx context.Context, d *discovery, scopes []string) (*Credentials, error) {
	if a.cfg.Grant == GrantJWTBearer {
		if a.assertion == nil {
			return nil, fmt.Errorf("%w: grant jwt-bearer without an assertion", ErrNotAuthorized)
		}
		jwt, err := a.assertion(ctx, d.asm.Issuer, d.resource)
		if err != nil {
			return nil, err
		}
		return a.jwtBearer(ctx, d, scopes, jwt)
	}
	return a.clientCredentials(ctx, d, scopes)
}

// clientCredentials obtains a token with the client credentials grant.
func (a *Authorizer) clientCredentials(ctx context.Context, d *discovery, scopes []string) (*Credentials, error) {
	if a.cfg.ClientID == "" {
		return nil, fmt.Errorf("%w: grant client_credentials needs a pre-registered client id", ErrNotAuthorized)
	}
	if len(d.asm.GrantTypesSupported) > 0 && !slices.Contains(d.asm.GrantTypesSupported, string(GrantClientCredentials)) {
		return nil, fmt.Errorf("%w: authorization server %s does not support the client_credentials grant (grant_types_supported %v)", ErrNotAuthorized, d.asm.Issuer, d.asm.GrantTypesSupported)
	}
	conf := clientcredentials.Config{ClientID: a.cfg.ClientID, TokenURL: d.asm.TokenEndpoint, Scopes: scopes,
		EndpointParams: url.Values{"resource": {d.resource}}}
	method := ""
	switch {
	case len(a.cfg.PrivateKey) > 0:
		method = "private_key_jwt"
		if len(d.asm.TokenEndpointAuthMethodsSupported) > 0 && !slices.Contains(d.asm.TokenEndpointAuthMethodsSupported, method) {
			return nil, fmt.Errorf("%w: authorization server %s does not accept private_key_jwt (token_endpoint_auth_methods_supported %v)", ErrNotAuthorized, d.asm.Issuer, d.asm.TokenEndpointAuthMethodsSupported)
		}
		assertion, err := a.clientAssertion(d)
		if err != nil {
			return nil, err
		}
		conf.AuthStyle = oauth2.AuthStyleInParams
		conf.EndpointParams.Set("client_assertion_type", jwtBearerAssertion)
		conf.EndpointParams.Set("client_assertion", assertion)
	case a.cfg.ClientSecret != "":
		client := &Credentials{ClientID: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret}
		method = authMethod(d, client)
		conf.ClientSecret = a.cfg.ClientSecret
		conf.AuthStyle = oauth2.AuthStyleInHeader
		if method == "client_secret_post" {
			conf.AuthStyle = oauth2.AuthStyleInParams
		}
	default:
		return nil, fmt.Errorf("%w: grant client_credentials needs a client secret or a private key", ErrNotAuthorized)
	}
	tok, err := conf.Token(a.tokenContext(ctx, d))
	if err != nil {
		return nil, tokenError(d, err)
	}
	c := credentialsOf(tok, &Credentials{ClientID: a.cfg.ClientID}, scopes)
	c.ClientSecret = "" // the configured secret stays in the configuration, not in the store
	a.observe(ctx, Step{Kind: StepToken, Issuer: d.asm.Issuer, ClientID: a.cfg.ClientID, Scopes: c.Scopes, Resource: d.resource,
		Detail: "client_credentials", Method: method})
	return c, nil
}

// clientAssertion signs an RFC 7523 client assertion: iss and sub the
// client id, aud the issuer (RFC 7523bis), a fresh jti, five minutes.
func (a *Authorizer) clientAssertion(d *discovery) (string, error) {
	key, alg, err := parsePrivateKey(a.cfg.PrivateKey, a.cfg.PrivateKeyAlg)
	if err != nil {
		return "", err
	}
	if algs := d.asm.TokenEndpointAuthSigningAlgs; len(algs) > 0 && !slices.Contains(algs, string(alg)) {
		return "", fmt.Errorf("%w: authorization server %s accepts client assertions signed with %v, the private key signs %s", ErrNotAuthorized, d.asm.Issuer, algs, alg)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", fmt.Errorf("oauth: client assertion signer: %w", err)
	}
	jti := make([]byte, 16)
	if _, err := rand.Read(jti); err != nil {
		return "", err
	}
	now := time.Now()
	claims := jwt.Claims{Issuer: a.cfg.ClientID, Subject: a.cfg.ClientID, Audience: jwt.Audience{d.asm.Issuer},
		ID: base64.RawURLEncoding.EncodeToString(jti), IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now.Add(-time.Minute)),
		Expiry: jwt.NewNumericDate(now.Add(assertionLifetime))}
	s, err := jwt.Signed(signer).Claims(claims).Serialize()
	if err != nil {
		return "", fmt.Errorf("oauth: client assertion: %w", err)
	}
	return s, nil
}

// errPrivateKey describes an unusable private key, never its bytes.
var errPrivateKey = errors.New("oauth: private key")

// parsePrivateKey reads a PEM private key (PKCS#8, SEC 1 EC or PKCS#1 RSA)
// and the JWS algorithm to sign with: alg when given (it must fit the
// key), else ES256/ES384 by curve, RS256 for RSA, EdDSA for Ed25519.
func parsePrivateKey(pemBytes []byte, alg string) (crypto.Signer, jose.SignatureAlgorithm, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, "", fmt.Errorf("%w: not PEM (want -----BEGIN PRIVATE KEY-----)", errPrivateKey)
	}
	var key any
	var err error
	switch block.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(block.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
	default:
		return nil, "", fmt.Errorf("%w: PEM block %q is not a private key", errPrivateKey, block.Type)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s block does not parse", errPrivateKey, block.Type)
	}
	var def jose.SignatureAlgorithm
	var fits []jose.SignatureAlgorithm
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		switch k.Curve {
		case elliptic.P256():
			def, fits = jose.ES256, []jose.SignatureAlgorithm{jose.ES256}
		case elliptic.P384():
			def, fits = jose.ES384, []jose.SignatureAlgorithm{jose.ES384}
		default:
			return nil, "", fmt.Errorf("%w: EC curve %s is not supported (P-256, P-384)", errPrivateKey, k.Curve.Params().Name)
		}
	case *rsa.PrivateKey:
		def, fits = jose.RS256, []jose.SignatureAlgorithm{jose.RS256, jose.PS256}
	case ed25519.PrivateKey:
		def, fits = jose.EdDSA, []jose.SignatureAlgorithm{jose.EdDSA}
	default:
		return nil, "", fmt.Errorf("%w: %T keys are not supported", errPrivateKey, key)
	}
	if alg == "" {
		return key.(crypto.Signer), def, nil
	}
	if !slices.Contains(fits, jose.SignatureAlgorithm(alg)) {
		return nil, "", fmt.Errorf("%w: algorithm %s does not fit a %T key (want %v)", errPrivateKey, alg, key, fits)
	}
	return key.(crypto.Signer), jose.SignatureAlgorithm(alg), nil
}

// jwtBearer exchanges a workload identity JWT for a token (RFC 7523 §2.1).
// A refusal is final: the grant is not retried and no other grant is tried.
func (a *Authorizer) jwtBearer(ctx context.Context, d *discovery, scopes []string, assertion string) (*Credentials, error) {
	if len(d.asm.GrantTypesSupported) > 0 && !slices.Contains(d.asm.GrantTypesSupported, string(GrantJWTBearer)) {
		return nil, fmt.Errorf("%w: authorization server %s does not support the jwt-bearer grant (grant_types_supported %v)", ErrNotAuthorized, d.asm.Issuer, d.asm.GrantTypesSupported)
	}
	// x/oauth2's client credentials request with its grant_type replaced
	// (clientcredentials allows that override): client_id in the form, no secret.
	conf := clientcredentials.Config{ClientID: a.cfg.ClientID, TokenURL: d.asm.TokenEndpoint, Scopes: scopes, AuthStyle: oauth2.AuthStyleInParams,
		EndpointParams: url.Values{"grant_type": {string(GrantJWTBearer)}, "assertion": {assertion}, "resource": {d.resource}}}
	if a.cfg.ClientSecret != "" { // a confidential client (enterprise-managed authorization)
		conf.ClientSecret = a.cfg.ClientSecret
		if authMethod(d, &Credentials{ClientID: a.cfg.ClientID, ClientSecret: a.cfg.ClientSecret}) == "client_secret_basic" {
			conf.AuthStyle = oauth2.AuthStyleInHeader
		}
	}
	tok, err := conf.Token(a.tokenContext(ctx, d))
	if err != nil {
		return nil, tokenError(d, err)
	}
	c := credentialsOf(tok, &Credentials{ClientID: a.cfg.ClientID}, scopes)
	a.observe(ctx, Step{Kind: StepToken, Issuer: d.asm.Issuer, ClientID: a.cfg.ClientID, Scopes: c.Scopes, Resource: d.resource, Detail: "jwt-bearer"})
	return c, nil
}

// Token types of the identity assertion authorization grant.
const (
	tokenTypeIDToken = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG   = "urn:ietf:params:oauth:token-type:id-jag"
	grantTokenExch   = "urn:ietf:params:oauth:grant-type:token-exchange"
)

// IDJAG returns a WithAssertion source for enterprise-managed
// authorization (the MCP extension
// io.modelcontextprotocol/enterprise-managed-authorization): the user's
// ID token from the enterprise IdP is exchanged there (RFC 8693 token
// exchange at idpTokenURL, as idpClientID) for an Identity Assertion JWT
// Authorization Grant (ID-JAG) whose audience is the MCP server's
// authorization server and resource the MCP server; that ID-JAG is the
// jwt-bearer grant. idToken is called for each exchange (a secret).
// client, nil for a default one, makes the exchange.
func IDJAG(idpTokenURL, idpClientID string, idToken func(context.Context) (string, error), client *http.Client) func(ctx context.Context, issuer, resource string) (string, error) {
	return func(ctx context.Context, issuer, resource string) (string, error) {
		if err := checkSecure(idpTokenURL); err != nil {
			return "", err
		}
		tok, err := idToken(ctx)
		if err != nil {
			return "", err
		}
		conf := clientcredentials.Config{ClientID: idpClientID, TokenURL: idpTokenURL, AuthStyle: oauth2.AuthStyleInParams,
			EndpointParams: url.Values{"grant_type": {grantTokenExch}, "subject_token": {tok}, "subject_token_type": {tokenTypeIDToken},
				"requested_token_type": {tokenTypeIDJAG}, "audience": {issuer}, "resource": {resource}}}
		if client == nil {
			client = &http.Client{Timeout: httpTimeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		}
		jag, err := conf.Token(context.WithValue(ctx, oauth2.HTTPClient, client))
		if err != nil {
			var re *oauth2.RetrieveError
			if errors.As(err, &re) {
				return "", fmt.Errorf("%w: IdP token exchange at %s answered error %q", ErrNotAuthorized, withoutQuery(idpTokenURL), re.ErrorCode)
			}
			return "", fmt.Errorf("oauth: IdP token exchange at %s: %w", withoutQuery(idpTokenURL), err)
		}
		return jag.AccessToken, nil
	}
}
