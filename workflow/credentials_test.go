package workflow_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/transport/oauth/oauthtest"
	"github.com/agentctl/agentctl/workflow"
)

// authorizedPost sends one request as the transport does: credentials
// set, a 401 answered by the client and the request re-sent once.
func authorizedPost(ctx context.Context, c *oauth.Client, u string) (int, error) {
	for attempt := 0; ; attempt++ {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if err := c.Authorize(ctx, req); err != nil {
			return 0, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || attempt == 1 {
			return resp.StatusCode, nil
		}
		if err := c.OnUnauthorized(ctx, resp); err != nil {
			return 0, err
		}
	}
}

// TestCredentialStore_WorkersRefreshOnce (issue 31 item 4): a login is
// stored in the database; its access token expires; workers in two
// processes (two handles of one database, SQLite or PostgreSQL), each
// with its own oauth.Client, need it at once. The authorization server,
// which rotates refresh tokens and refuses a spent one, is asked for
// exactly one refresh, and every worker is served with the new token.
func TestCredentialStore_WorkersRefreshOnce(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		ctx := context.Background()
		as := oauthtest.NewAS(t)
		res := oauthtest.Protect(t, as, mcptest.Options{})
		dsn := b.DSN(t)
		stores := []workflow.CredentialStore{
			{DB: testkit.OpenDB(t, dsn, events.Options{}), AllowPlaintext: true},
			{DB: testkit.OpenDB(t, dsn, events.Options{}), AllowPlaintext: true},
		}
		login, err := oauth.NewClient(res.URL, oauth.Config{OpenBrowser: oauthtest.Browser}, stores[0], nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := login.Login(ctx); err != nil {
			t.Fatalf("login: %v", err)
		}
		k, ok := login.Key()
		if !ok {
			t.Fatal("no key after login")
		}
		// The access token expires (and the resource forgets it).
		if _, err := stores[0].Update(ctx, k, func(c *oauth.Credentials) (*oauth.Credentials, error) {
			c.Expiry = time.Now().Add(-time.Minute)
			return c, nil
		}); err != nil {
			t.Fatal(err)
		}
		as.RevokeAccess()

		const workers = 6
		// The first refresh is held at the token endpoint until every
		// worker has discovered the authorization server (and so is about
		// to read the stored credentials): without the row lock they would
		// all read the expired token and spend the refresh token again.
		var arrived sync.WaitGroup
		arrived.Add(workers)
		hold := &holdFirst{wait: arrived.Wait}
		obs := oauth.ObserverFunc(func(_ context.Context, s oauth.Step) {
			if s.Kind == oauth.StepServerMeta {
				arrived.Done()
			}
		})
		var start sync.WaitGroup
		start.Add(1)
		var wg sync.WaitGroup
		status := make([]int, workers)
		errs := make([]error, workers)
		for i := 0; i < workers; i++ {
			c, err := oauth.NewClient(res.URL, oauth.Config{HTTPClient: &http.Client{Transport: hold}}, stores[i%2], obs)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				start.Wait()
				status[i], errs[i] = authorizedPost(ctx, c, res.URL)
			}(i)
		}
		start.Done()
		wg.Wait()
		for i := range status {
			// Past the bearer check, the MCP server answers the bare ping
			// (no session) with 400: the request was authorized.
			if errs[i] != nil || status[i] == http.StatusUnauthorized || status[i] == 0 {
				t.Fatalf("worker %d: status %d, %v; want the request authorized", i, status[i], errs[i])
			}
		}
		if n := as.Count("/token", "refresh_token"); n != 1 {
			t.Fatalf("the authorization server got %d refresh requests; want exactly 1", n)
		}
		cur, err := stores[1].Load(ctx, k)
		if err != nil || cur == nil || cur.RefreshToken == "" || cur.Expiry.Before(time.Now()) {
			t.Fatalf("stored after the refresh: %v, %v; want the rotated refresh token and a fresh expiry", cur, err)
		}
	})
}

// holdFirst holds the first refresh_token request until wait returns.
type holdFirst struct {
	once sync.Once
	wait func()
}

func (h *holdFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil && r.GetBody != nil {
		if b, err := r.GetBody(); err == nil {
			raw := new(strings.Builder)
			_, _ = io.Copy(raw, b)
			if strings.Contains(raw.String(), "grant_type=refresh_token") {
				h.once.Do(h.wait)
			}
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}
