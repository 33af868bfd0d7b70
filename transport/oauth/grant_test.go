package oauth

import (
	"context"
	"net/http"
	"strings"
	"testing"
)

// TestAuthorizerGrantDispatch: the plain Authorizer (not only the Client)
// runs the headless grants through its one grant dispatch: a 401 obtains
// a client credentials token and the re-sent request is served; Login
// obtains one too, reusing a stored token still valid (no second token).
func TestAuthorizerGrantDispatch(t *testing.T) {
	s := newExtServer(t, "client_secret_post", nil, false, false)
	a, err := New(s.URL+"/mcp", Config{Grant: GrantClientCredentials, ClientID: "cc-client", ClientSecret: "cc-secret-value"}, NewMemStore(), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	send := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/mcp", strings.NewReader(`{}`))
		if err := a.Authorize(ctx, req); err != nil {
			t.Fatalf("authorize: %v", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusUnauthorized {
			if err := a.OnUnauthorized(ctx, resp); err != nil {
				t.Fatalf("on 401: %v", err)
			}
		}
		return resp.StatusCode
	}
	if st := send(); st != http.StatusUnauthorized {
		t.Fatalf("first request: status %d, want 401", st)
	}
	if st := send(); st != http.StatusOK {
		t.Fatalf("re-sent request: status %d (server: %v)", st, s.errs)
	}
	if err := a.Login(ctx); err != nil {
		t.Fatalf("login: %v", err)
	}
	if s.issued != 1 || s.resourceOK != 1 || len(s.errs) != 0 {
		t.Fatalf("issued %d tokens, %d requests served, errors %v; want 1, 1, none", s.issued, s.resourceOK, s.errs)
	}
}
