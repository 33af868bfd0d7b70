package workflow

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/workflow/spec"
)

// A remote's auth: {oauth: …} block (issue 31) becomes an oauth.Client on
// its transport configuration: credentials in the database
// (CredentialStore), every auth step an auth.step event without secret. A
// run never opens a browser: the authorization-code grant needs a login
// made beforehand (`agentctl auth login`), and MissingLogins finds the
// remotes without one before anything is sent.

// OAuthConfig resolves remote's auth block into an oauth.Config (ok false
// when the remote has none). Secret references are resolved now, under the
// workflow's policy; their values are never in an error.
func OAuthConfig(wf *spec.Workflow, remote string, getenv func(string) string) (cfg oauth.Config, ok bool, err error) {
	srv := wf.Spec.MCPServers[remote]
	if srv.Auth == nil || srv.Auth.OAuth == nil || srv.IsStdio() {
		return oauth.Config{}, false, nil
	}
	o := srv.Auth.OAuth
	pol := wf.TransportConfig(remote).Policy
	resolve := func(what string, r spec.SecretRefSpec) (string, error) {
		v, err := transport.SecretRef{Env: r.Env, File: r.File}.Resolve(pol, getenv)
		if err != nil {
			return "", fmt.Errorf("remote %s: auth.oauth.%s: %w", remote, what, err)
		}
		return v, nil
	}
	grant := oauth.Grant(o.GrantOrDefault())
	if o.GrantOrDefault() == spec.GrantJWTBearer {
		grant = oauth.GrantJWTBearer
	}
	cfg = oauth.Config{Grant: grant, Scopes: slices.Clone(o.Scopes), DPoP: o.DPoP,
		ClientMetadataURL: o.ClientMetadataURL, PrivateKeyAlg: o.PrivateKeyAlg,
		HTTPClient: transport.PolicyClient(OAuthPolicy(pol))}
	if o.ClientID != nil {
		cfg.ClientID = o.ClientID.Value
		if o.ClientID.IsSecret() {
			if cfg.ClientID, err = resolve("clientId", spec.SecretRefSpec{Env: o.ClientID.Env, File: o.ClientID.File}); err != nil {
				return cfg, true, err
			}
		}
	}
	if o.ClientSecret != nil {
		if cfg.ClientSecret, err = resolve("clientSecret", *o.ClientSecret); err != nil {
			return cfg, true, err
		}
	}
	if o.PrivateKey != nil {
		k, err := resolve("privateKey", *o.PrivateKey)
		if err != nil {
			return cfg, true, err
		}
		cfg.PrivateKey = []byte(k)
	}
	return cfg, true, nil
}

// OAuthPolicy is the network policy of a remote's OAuth requests
// (metadata, registration, token, and where they redirect): the remote's
// host allowlist and private-address rule, checked on the addresses
// resolved at connect time, and its connect timeout. Schemes and ports are
// OAuth's own rule (https, or http on a loopback host): an authorization
// server seldom shares the MCP server's port. A 401 naming an internal
// address (a cloud metadata endpoint, a private service) is thus refused
// before any byte is sent unless the policy allows private addresses, and
// with a host allowlist only listed hosts are asked.
func OAuthPolicy(p transport.Policy) transport.Policy {
	return transport.Policy{NetworkAllowlist: slices.Clone(p.NetworkAllowlist), AllowPrivate: p.AllowPrivate,
		AllowedSchemes: []string{"http", "https"}, ConnectTimeout: p.ConnectTimeout, Resolver: p.Resolver}
}

// credentialStore is the Runner's oauth.Store.
func (r *Runner) credentialStore() oauth.Store {
	if r.Credentials != nil {
		return r.Credentials
	}
	return CredentialStore{DB: r.DB, AllowPlaintext: r.AllowPlaintextCredentials}
}

// authorize sets cfg.Authorizer for remote when it has an auth block.
func (rn *run) authorize(remote string, cfg *transport.Config) error {
	if rn.replay {
		return nil // a replay answers from the log: no server, no token
	}
	ocfg, ok, err := OAuthConfig(rn.wf, remote, rn.r.Getenv)
	if err != nil || !ok {
		return err
	}
	ocfg.HTTPClient = transport.PolicyClient(OAuthPolicy(cfg.Policy)) // the connection's own policy
	c, err := oauth.NewClient(cfg.URL, ocfg, rn.r.credentialStore(), rn.authObserver(remote), AssertionOption(rn.wf, remote, rn.r.Getenv)...)
	if err != nil {
		return fmt.Errorf("remote %s: auth: %w", remote, err)
	}
	cfg.Authorizer = c
	return nil
}

// authObserver queues every auth step of remote as an auth.step event;
// it rides with the run's next commit (the step may happen inside a
// credentials transaction, which must not wait for the log).
func (rn *run) authObserver(remote string) oauth.Observer {
	return oauth.ObserverFunc(func(_ context.Context, s oauth.Step) {
		rec := events.Record{Stream: "auth/" + remote, Type: vocab.TypeAuthStep, Payload: vocab.AuthStep{
			Remote: remote, Kind: string(s.Kind), Issuer: s.Issuer, Resource: s.Resource, ClientID: s.ClientID,
			Scopes: s.Scopes, URL: s.URL, Method: s.Method, Detail: s.Detail}}
		rn.authMu.Lock()
		rn.authQ = append(rn.authQ, rec)
		rn.authMu.Unlock()
	})
}

// takeAuthSteps returns the queued auth.step records and empties the queue.
func (rn *run) takeAuthSteps() []events.Record {
	rn.authMu.Lock()
	defer rn.authMu.Unlock()
	q := rn.authQ
	rn.authQ = nil
	return q
}

// MissingLogin is a remote whose authorization-code grant has no stored
// credentials: a run would need a user to log in.
type MissingLogin struct {
	Remote, URL string
}

// LoginRequiredError refuses a run that needs logins it does not have
// (exit 6, before anything is sent), naming the command that makes each.
type LoginRequiredError struct {
	File    string
	Missing []MissingLogin
}

func (e *LoginRequiredError) Error() string {
	var b strings.Builder
	for i, m := range e.Missing {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "remote %s (%s) needs a login: run `agentctl auth login -f %s %s`", m.Remote, m.URL, e.File, m.Remote)
	}
	return b.String()
}

// MissingLogins lists the remotes the workflow's tasks use whose auth block
// uses the authorization-code grant and for which the database holds no
// credentials (any issuer, for the remote's URL as resource).
func MissingLogins(ctx context.Context, db *events.DB, wf *spec.Workflow) ([]MissingLogin, error) {
	used := map[string]bool{}
	for _, t := range wf.Spec.Tasks {
		used[t.With.Server] = true
	}
	var need []MissingLogin
	for name, srv := range wf.Spec.MCPServers {
		if used[name] && srv.Auth != nil && srv.Auth.OAuth != nil && !srv.IsStdio() && srv.Auth.OAuth.GrantOrDefault() == spec.GrantAuthorizationCode {
			need = append(need, MissingLogin{Remote: name, URL: srv.URL})
		}
	}
	if len(need) == 0 {
		return nil, nil
	}
	have, err := db.ListCredentials(ctx)
	if err != nil {
		return nil, err
	}
	var missing []MissingLogin
	for _, m := range need {
		if !slices.ContainsFunc(have, func(c events.CredentialInfo) bool { return ResourceCovers(c.Key.Resource, m.URL) }) {
			missing = append(missing, m)
		}
	}
	slices.SortFunc(missing, func(a, b MissingLogin) int { return strings.Compare(a.Remote, b.Remote) })
	return missing, nil
}

// ResourceCovers reports whether credentials for resource serve the MCP
// server at serverURL: the same URL (a trailing slash aside, scheme and
// host in any case), or a prefix of its path on the same origin.
func ResourceCovers(resource, serverURL string) bool {
	r, u := strings.TrimSuffix(resource, "/"), strings.TrimSuffix(serverURL, "/")
	if r == "" {
		return false
	}
	if strings.EqualFold(r, u) {
		return true
	}
	return len(u) > len(r) && strings.EqualFold(u[:len(r)], r) && u[len(r)] == '/'
}

// AssertionOption is the oauth.Client option of a jwt_bearer auth block:
// its assertion reference, resolved at every token request (a token file
// the platform rotates is read afresh); none for other grants.
func AssertionOption(wf *spec.Workflow, remote string, getenv func(string) string) []oauth.ClientOption {
	srv := wf.Spec.MCPServers[remote]
	if srv.Auth == nil || srv.Auth.OAuth == nil || srv.Auth.OAuth.Assertion == nil {
		return nil
	}
	ref := transport.SecretRef{Env: srv.Auth.OAuth.Assertion.Env, File: srv.Auth.OAuth.Assertion.File}
	pol := wf.TransportConfig(remote).Policy
	return []oauth.ClientOption{oauth.WithAssertion(func(context.Context, string, string) (string, error) {
		v, err := ref.Resolve(pol, getenv)
		if err != nil {
			return "", fmt.Errorf("remote %s: auth.oauth.assertion: %w", remote, err)
		}
		return strings.TrimSpace(v), nil
	})}
}
