package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/workflow"
)

// oauthExtFlags are the ad hoc commands' settings of the OAuth extensions:
// the client credentials grant (secret or RFC 7523 private key JWT) and
// DPoP. Secret values only by reference (env or file).
type oauthExtFlags struct {
	grant          string
	privateKeyEnv  string
	privateKeyFile string
	privateKeyAlg  string
	dpop           bool
	assertionEnv   string
	assertionFile  string
	idpTokenURL    string
	idpClientID    string
	idTokenEnv     string
}

func (o *oauthExtFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&o.grant, "oauth-grant", "", "authorization_code (default; a user logs in), client_credentials (headless: --oauth-client-id with a secret or a private key) or jwt-bearer (workload identity federation: --oauth-assertion-*)")
	cmd.Flags().StringVar(&o.privateKeyEnv, "oauth-private-key-env", "", "environment variable holding the client's PEM private key (RFC 7523 private_key_jwt)")
	cmd.Flags().StringVar(&o.privateKeyFile, "oauth-private-key-file", "", "file holding the client's PEM private key (RFC 7523 private_key_jwt)")
	cmd.Flags().StringVar(&o.privateKeyAlg, "oauth-private-key-alg", "", "JWS algorithm of the private key (RS256, PS256, ES256, ES384, EdDSA); default from the key")
	cmd.Flags().StringVar(&o.assertionEnv, "oauth-assertion-env", "", "environment variable holding the workload identity JWT (--oauth-grant jwt-bearer)")
	cmd.Flags().StringVar(&o.assertionFile, "oauth-assertion-file", "", "file holding the workload identity JWT, read at every token request (--oauth-grant jwt-bearer)")
	cmd.Flags().StringVar(&o.idpTokenURL, "oauth-idp-token-endpoint", "", "enterprise-managed authorization: the IdP's token endpoint, where the ID token is exchanged for an identity assertion grant (--oauth-grant jwt-bearer)")
	cmd.Flags().StringVar(&o.idpClientID, "oauth-idp-client-id", "", "enterprise-managed authorization: agentctl's client id at the IdP")
	cmd.Flags().StringVar(&o.idTokenEnv, "oauth-id-token-env", "", "enterprise-managed authorization: environment variable holding the user's ID token from the IdP")
	cmd.Flags().BoolVar(&o.dpop, "oauth-dpop", false, "bind tokens to a DPoP key (RFC 9449) even when the authorization server does not advertise DPoP")
}

func (o *oauthExtFlags) on() bool {
	return o.grant != "" || o.privateKeyEnv != "" || o.privateKeyFile != "" || o.privateKeyAlg != "" || o.dpop || o.assertionEnv != "" || o.assertionFile != "" || o.idpTokenURL != ""
}

// apply sets the extensions on cfg, resolving the private key reference now.
func (o *oauthExtFlags) apply(cfg *oauth.Config) error {
	switch o.grant {
	case "", string(oauth.GrantAuthorizationCode):
	case string(oauth.GrantClientCredentials):
		cfg.Grant = oauth.GrantClientCredentials
		if cfg.ClientID == "" {
			return usageErr("--oauth-grant client_credentials needs --oauth-client-id")
		}
	case "jwt-bearer":
		cfg.Grant = oauth.GrantJWTBearer
		n := 0
		for _, s := range []string{o.assertionEnv, o.assertionFile, o.idpTokenURL} {
			if s != "" {
				n++
			}
		}
		if n != 1 || (o.idpTokenURL != "") != (o.idTokenEnv != "") {
			return usageErr("--oauth-grant jwt-bearer needs one of --oauth-assertion-env, --oauth-assertion-file, or --oauth-idp-token-endpoint with --oauth-id-token-env")
		}
	default:
		return usageErr("--oauth-grant %q: want authorization_code, client_credentials or jwt-bearer", o.grant)
	}
	cfg.DPoP = o.dpop
	cfg.PrivateKeyAlg = o.privateKeyAlg
	switch {
	case o.privateKeyEnv != "" && o.privateKeyFile != "":
		return usageErr("--oauth-private-key-env and --oauth-private-key-file: give one")
	case o.privateKeyEnv != "":
		v := os.Getenv(o.privateKeyEnv)
		if v == "" {
			return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("--oauth-private-key-env %s: the variable is not set", o.privateKeyEnv)}
		}
		cfg.PrivateKey = []byte(v)
	case o.privateKeyFile != "":
		b, err := os.ReadFile(o.privateKeyFile)
		if err != nil {
			return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("--oauth-private-key-file: %w", err)}
		}
		cfg.PrivateKey = b
	}
	if len(cfg.PrivateKey) > 0 && cfg.ClientID == "" {
		return usageErr("--oauth-private-key-*: a private key needs --oauth-client-id")
	}
	return nil
}

// clientOptions are the oauth.Client options of the flags: the workload
// identity JWT, read when a token is requested (a rotated file is read
// afresh); hc makes the IdP token exchange (no redirect followed).
func (o *oauthExtFlags) clientOptions(hc *http.Client) []oauth.ClientOption {
	switch {
	case o.idpTokenURL != "":
		name := o.idTokenEnv
		return []oauth.ClientOption{oauth.WithAssertion(oauth.IDJAG(o.idpTokenURL, o.idpClientID, func(context.Context) (string, error) {
			if v := os.Getenv(name); v != "" {
				return v, nil
			}
			return "", fmt.Errorf("--oauth-id-token-env %s: the variable is not set", name)
		}, noRedirects(hc)))}
	case o.assertionEnv != "":
		name := o.assertionEnv
		return []oauth.ClientOption{oauth.WithAssertion(func(context.Context, string, string) (string, error) {
			if v := os.Getenv(name); v != "" {
				return v, nil
			}
			return "", fmt.Errorf("--oauth-assertion-env %s: the variable is not set", name)
		})}
	case o.assertionFile != "":
		file := o.assertionFile
		return []oauth.ClientOption{oauth.WithAssertion(func(context.Context, string, string) (string, error) {
			b, err := os.ReadFile(file)
			if err != nil {
				return "", fmt.Errorf("--oauth-assertion-file: %w", err)
			}
			return strings.TrimSpace(string(b)), nil
		})}
	}
	return nil
}

// noRedirects is hc following no redirect (nil stays nil: IDJAG's default).
func noRedirects(hc *http.Client) *http.Client {
	if hc == nil {
		return nil
	}
	c := *hc
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if c.Timeout == 0 {
		c.Timeout = 30 * time.Second
	}
	return &c
}
