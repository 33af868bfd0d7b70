package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// requireLogins refuses (exit 6, before anything is sent or recorded) a
// workflow whose authorization-code remotes have no stored login, naming
// the command that makes each: a run never waits for a browser.
func requireLogins(ctx context.Context, db *events.DB, wf *spec.Workflow) error {
	missing, err := workflow.MissingLogins(ctx, db, wf)
	if err != nil {
		return err
	}
	if len(missing) > 0 {
		return &exitError{code: workflow.ExitRemote, err: &workflow.LoginRequiredError{File: wf.File, Missing: missing}}
	}
	return nil
}

func (a *app) authCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "auth",
		Short: "OAuth logins for MCP servers: login, status, logout",
		Long: `auth manages the OAuth credentials agentctl keeps for MCP servers behind MCP authorization
(OAuth 2.1). They live in the database's credentials table, sealed with the database key when
encryption is on (agentctl db encryption enable); without encryption they are refused unless
--allow-plaintext-credentials is given. Tokens are never printed, logged or recorded in a run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(a.authLoginCmd(), a.authStatusCmd(), a.authLogoutCmd())
	return cmd
}

func (a *app) authLoginCmd() *cobra.Command {
	var file string
	var of oauthFlags
	var allowPrivate bool
	cmd := &cobra.Command{
		Use:   "login (-f FILE SERVER | URL)",
		Short: "Log in to an MCP server: the authorization-code flow on a loopback redirect",
		Long: `login runs the OAuth authorization-code flow (PKCE S256) for a server: the server named
SERVER in the workflow FILE (its auth: block configures the client), or the MCP server at URL
(the --oauth-* flags configure it). agentctl listens on 127.0.0.1 on a random port for the
redirect, opens $BROWSER with the authorization URL when it is set, else prints the URL to open.
A server whose auth block uses client_credentials needs no user: login obtains its token now.
The login's own requests (metadata, registration, token) obey the workflow's network policy
(its host allowlist; private addresses only with allowPrivate), or for a URL go to any public
host, private ones only with --allow-private.
The credentials are stored in the database; runs of the workflow then use and refresh them.`,
		Example: "  agentctl auth login -f examples/tracker.yaml tracker\n  agentctl auth login https://mcp.example.com/mcp --oauth-scope issues.read\n  BROWSER=firefox agentctl auth login -f wf.yaml docs",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			serverURL, cfg, err := a.loginConfig(file, args[0], &of)
			if err != nil {
				return err
			}
			if file == "" {
				cfg.HTTPClient = oauthHTTPClient(allowPrivate)
			} else if allowPrivate {
				return usageErr("auth login -f: the workflow's policy (network.allowPrivate) decides; drop --allow-private")
			}
			opts := of.ext.clientOptions(cfg.HTTPClient)
			if file != "" {
				wf, err := spec.Load(file)
				if err != nil {
					return invalid(err)
				}
				opts = workflow.AssertionOption(wf, args[0], os.Getenv)
			}
			return a.withDB(ctx, func(db *events.DB) error {
				store := workflow.CredentialStore{DB: db, AllowPlaintext: a.allowPlaintextCreds}
				c, err := oauth.NewClient(serverURL, cfg, store, stepPrinter(a.stderr), opts...)
				if err != nil {
					return usageErr("auth login: %w", err)
				}
				if err := c.Login(ctx); err != nil {
					var se *events.Error
					if errors.As(err, &se) || errors.Is(err, events.ErrPlaintextCredentials) {
						return &exitError{code: workflow.ExitStorage, err: err}
					}
					return &exitError{code: workflow.ExitRemote, err: fmt.Errorf("auth login %s: %w", serverURL, err)}
				}
				k, _ := c.Key()
				return a.printLogins(db, func(in events.CredentialInfo) bool { return in.Key.Issuer == k.Issuer && in.Key.Resource == k.Resource }, "AuthLogin")
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "workflow file whose server SERVER to log in to")
	cmd.Flags().BoolVar(&allowPrivate, "allow-private", false, "for a URL: let the login's requests reach loopback and private addresses (needed for 127.0.0.1)")
	of.register(cmd)
	return cmd
}

// loginConfig is the server URL and client configuration of a login: a
// workflow file's server, or a URL with the --oauth-* flags.
func (a *app) loginConfig(file, arg string, of *oauthFlags) (string, oauth.Config, error) {
	if file == "" {
		if !strings.Contains(arg, "://") {
			return "", oauth.Config{}, usageErr("auth login %s: give a URL, or -f FILE with a server of that file", arg)
		}
		cfg, err := of.config(a.stderr)
		return arg, cfg, err
	}
	if of.on() {
		return "", oauth.Config{}, usageErr("auth login -f: the workflow's auth block configures the client; drop the --oauth-* flags")
	}
	wf, err := spec.Load(file)
	if err != nil {
		return "", oauth.Config{}, invalid(err)
	}
	srv, ok := wf.Spec.MCPServers[arg]
	if !ok {
		return "", oauth.Config{}, usageErr("auth login: %s declares no server %q", file, arg)
	}
	cfg, ok, err := workflow.OAuthConfig(wf, arg, os.Getenv)
	switch {
	case err != nil:
		return "", oauth.Config{}, &exitError{code: workflow.ExitInvalid, err: err}
	case !ok:
		return "", oauth.Config{}, usageErr("auth login: server %s of %s has no auth: {oauth: …} block", arg, file)
	}
	cfg.OpenBrowser = func(ctx context.Context, u string) error { return openBrowser(ctx, a.stderr, u) }
	return srv.URL, cfg, nil
}

// loginView is one stored login, without its secrets.
type loginView struct {
	Issuer    string    `json:"issuer"`
	ClientID  string    `json:"clientId"`
	Resource  string    `json:"resource"`
	Scopes    []string  `json:"scopes"`
	TokenType string    `json:"tokenType,omitempty"`
	Expiry    *string   `json:"expiry"`
	Sealed    bool      `json:"sealed"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// printLogins prints the stored logins keep selects.
func (a *app) printLogins(db *events.DB, keep func(events.CredentialInfo) bool, kind string) error {
	all, err := db.ListCredentials(context.Background())
	if err != nil {
		return err
	}
	views := []loginView{}
	for _, in := range all {
		if !keep(in) {
			continue
		}
		v := loginView{Issuer: in.Key.Issuer, ClientID: in.Key.ClientID, Resource: in.Key.Resource, Scopes: in.Scopes,
			TokenType: in.TokenType, Sealed: in.Sealed, UpdatedAt: in.UpdatedAt}
		if v.Scopes == nil {
			v.Scopes = []string{}
		}
		if !in.Expiry.IsZero() {
			s := in.Expiry.UTC().Format(time.RFC3339)
			v.Expiry = &s
		}
		views = append(views, v)
	}
	if a.output != "human" {
		return a.printJSON(a.stdout, kind, true, map[string]any{"logins": views})
	}
	if len(views) == 0 {
		fmt.Fprintln(a.stdout, "no logins")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ISSUER\tCLIENT\tRESOURCE\tSCOPES\tEXPIRES\tSEALED")
	for _, v := range views {
		exp := "-"
		if v.Expiry != nil {
			exp = *v.Expiry
		}
		client := v.ClientID
		if client == "" {
			client = "(registered)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%v\n", clean(v.Issuer), clean(client), clean(v.Resource), clean(strings.Join(v.Scopes, " ")), exp, v.Sealed)
	}
	return tw.Flush()
}

func (a *app) authStatusCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "status",
		Short:   "List the stored logins: issuer, client, resource, scopes, expiry (never a token)",
		Example: "  agentctl auth status\n  agentctl auth status --output json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				return a.printLogins(db, func(events.CredentialInfo) bool { return true }, "AuthStatus")
			})
		},
	}
}

func (a *app) authLogoutCmd() *cobra.Command {
	var file, issuer string
	var all bool
	cmd := &cobra.Command{
		Use:     "logout (-f FILE SERVER | URL | --all)",
		Short:   "Forget stored logins: a server's, an issuer's (--issuer) or all (--all)",
		Example: "  agentctl auth logout -f wf.yaml docs\n  agentctl auth logout https://mcp.example.com/mcp\n  agentctl auth logout --all",
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var target string
			switch {
			case all && (len(args) > 0 || issuer != ""):
				return usageErr("auth logout --all takes no server and no --issuer")
			case file != "" && len(args) == 1:
				wf, err := spec.Load(file)
				if err != nil {
					return invalid(err)
				}
				srv, ok := wf.Spec.MCPServers[args[0]]
				if !ok {
					return usageErr("auth logout: %s declares no server %q", file, args[0])
				}
				target = srv.URL
			case len(args) == 1:
				target = args[0]
			case !all && issuer == "":
				return usageErr("auth logout: give a server (-f FILE SERVER or URL), --issuer or --all")
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				ctx := cmd.Context()
				list, err := db.ListCredentials(ctx)
				if err != nil {
					return err
				}
				n := 0
				for _, in := range list {
					if (target != "" && !workflow.ResourceCovers(in.Key.Resource, target)) || (issuer != "" && in.Key.Issuer != issuer) {
						continue
					}
					m, err := db.DeleteCredentials(ctx, in.Key)
					if err != nil {
						return err
					}
					n += m
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "AuthLogout", true, map[string]any{"forgotten": n})
				}
				fmt.Fprintf(a.stdout, "forgot %d login(s)\n", n)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&file, "file", "f", "", "workflow file whose server SERVER to log out of")
	cmd.Flags().StringVar(&issuer, "issuer", "", "forget every login of this authorization server (issuer URL)")
	cmd.Flags().BoolVar(&all, "all", false, "forget every login")
	return cmd
}
