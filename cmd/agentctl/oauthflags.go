package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/workflow"
)

// oauthFlags are the ad hoc commands' OAuth client settings (until a
// workflow's auth: block): secrets only by reference (env or file).
type oauthFlags struct {
	enabled        bool
	clientID       string
	secretEnv      string
	secretFile     string
	metadataURL    string
	scopes         []string
	redirectURI    string
	nonInteractive bool
	ext            oauthExtFlags // oauthflags_ext.go
}

func (o *oauthFlags) register(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&o.enabled, "oauth", false, "authorize with MCP OAuth (authorization code + PKCE on a loopback redirect; the client registered dynamically unless --oauth-client-id or --oauth-client-metadata-url); implied by any --oauth-* flag")
	cmd.Flags().StringVar(&o.clientID, "oauth-client-id", "", "pre-registered OAuth client id")
	cmd.Flags().StringVar(&o.secretEnv, "oauth-client-secret-env", "", "environment variable holding the pre-registered client's secret")
	cmd.Flags().StringVar(&o.secretFile, "oauth-client-secret-file", "", "file holding the pre-registered client's secret")
	cmd.Flags().StringVar(&o.metadataURL, "oauth-client-metadata-url", "", "https URL of this client's Client ID Metadata Document, used as its client id where the authorization server supports it")
	cmd.Flags().StringArrayVar(&o.scopes, "oauth-scope", nil, "scope to request when the server's challenge names none; repeatable")
	cmd.Flags().StringVar(&o.redirectURI, "oauth-redirect-uri", "", "loopback redirect URI (default http://127.0.0.1:RANDOM/callback)")
	cmd.Flags().BoolVar(&o.nonInteractive, "oauth-no-browser", false, "never open a browser: a login that needs the user fails (exit 6)")
	o.ext.register(cmd)
}

// on reports whether any OAuth flag was given.
func (o *oauthFlags) on() bool {
	return o.enabled || o.clientID != "" || o.secretEnv != "" || o.secretFile != "" || o.metadataURL != "" ||
		len(o.scopes) > 0 || o.redirectURI != "" || o.nonInteractive || o.ext.on()
}

// config builds the oauth.Config, resolving the secret reference now.
func (o *oauthFlags) config(stderr io.Writer) (oauth.Config, error) {
	cfg := oauth.Config{ClientID: o.clientID, ClientMetadataURL: o.metadataURL, Scopes: o.scopes, RedirectURI: o.redirectURI,
		Grant: oauth.GrantAuthorizationCode}
	switch {
	case o.secretEnv != "" && o.secretFile != "":
		return cfg, usageErr("--oauth-client-secret-env and --oauth-client-secret-file: give one")
	case (o.secretEnv != "" || o.secretFile != "") && o.clientID == "":
		return cfg, usageErr("--oauth-client-secret-*: a secret needs --oauth-client-id")
	case o.secretEnv != "":
		v, ok := os.LookupEnv(o.secretEnv)
		if !ok || v == "" {
			return cfg, &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("--oauth-client-secret-env %s: the variable is not set", o.secretEnv)}
		}
		cfg.ClientSecret = v
	case o.secretFile != "":
		b, err := os.ReadFile(o.secretFile)
		if err != nil {
			return cfg, &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("--oauth-client-secret-file: %w", err)}
		}
		cfg.ClientSecret = strings.TrimRight(string(b), "\r\n")
	}
	if err := o.ext.apply(&cfg); err != nil {
		return cfg, err
	}
	if !o.nonInteractive {
		cfg.OpenBrowser = func(ctx context.Context, u string) error { return openBrowser(ctx, stderr, u) }
	}
	return cfg, nil
}

// openBrowser runs $BROWSER with the URL (its %s replaced, else appended);
// without $BROWSER it prints the URL for the user to open.
func openBrowser(ctx context.Context, stderr io.Writer, u string) error {
	b := strings.Fields(os.Getenv("BROWSER"))
	if len(b) == 0 {
		fmt.Fprintf(stderr, "Open this URL in a browser to authorize agentctl:\n  %s\n", u)
		return nil
	}
	args, replaced := b[1:], false
	for i, a := range args {
		if strings.Contains(a, "%s") {
			args[i], replaced = strings.ReplaceAll(a, "%s", u), true
		}
	}
	if !replaced {
		args = append(args, u)
	}
	cmd := exec.CommandContext(ctx, b[0], args...)
	if f, ok := stderr.(*os.File); ok { // the browser's own messages, on a terminal; never copied into a buffer written concurrently
		cmd.Stdout, cmd.Stderr = f, f
	}
	// The browser runs beside the wait for its redirect: started, not waited on here.
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("$BROWSER %s: %w", b[0], err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// oauthHTTPClient is the OAuth requests' client of a command given a URL
// and --oauth-* flags: no host allowlist, private addresses (checked at
// connect time) only with --allow-private.
func oauthHTTPClient(allowPrivate bool) *http.Client {
	return transport.PolicyClient(workflow.OAuthPolicy(transport.Policy{AllowPrivate: allowPrivate}))
}

// stepPrinter shows each auth step (no secret in them) on stderr.
func stepPrinter(w io.Writer) oauth.Observer {
	return oauth.ObserverFunc(func(_ context.Context, s oauth.Step) {
		var b strings.Builder
		fmt.Fprintf(&b, "auth: %s", s.Kind)
		for _, kv := range [][2]string{{"issuer", s.Issuer}, {"client", s.ClientID}, {"method", s.Method}, {"url", s.URL}, {"scopes", strings.Join(s.Scopes, " ")}, {"detail", strings.TrimSpace(s.Detail)}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, " %s=%q", kv[0], kv[1])
			}
		}
		fmt.Fprintln(w, clean(b.String()))
	})
}

// oauthDialer dials remotes with an OAuth Authorizer on their config.
type oauthDialer struct {
	base workflow.Dialer
	auth transport.Authorizer
}

// Dial implements workflow.Dialer.
func (d oauthDialer) Dial(remote string, cfg transport.Config) (workflow.Conn, error) {
	cfg.Authorizer = d.auth
	return d.base.Dial(remote, cfg)
}

// withOAuth sets a.dialer for an ad hoc command against serverURL when any
// OAuth flag was given (credentials kept in memory for this command).
// Its OAuth requests go to any host, private addresses only with
// --allow-private (as the server's own connection).
func (a *app) withOAuth(o *oauthFlags, to target, allowPrivate bool) error {
	if !o.on() {
		return nil
	}
	if to.url == "" {
		return usageErr("--oauth flags apply to a URL, not to a stdio server")
	}
	cfg, err := o.config(a.stderr)
	if err != nil {
		return err
	}
	cfg.HTTPClient = oauthHTTPClient(allowPrivate)
	auth, err := oauth.NewClient(to.url, cfg, oauth.NewMemStore(), stepPrinter(a.stderr), o.ext.clientOptions(cfg.HTTPClient)...)
	if err != nil {
		var ue *exitError
		if errors.As(err, &ue) {
			return err
		}
		return usageErr("--oauth: %w", err)
	}
	a.dialer = oauthDialer{base: workflow.NetworkDialer{}, auth: auth}
	return nil
}
