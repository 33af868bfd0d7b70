package oauth_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/transport/oauth"
)

// Printing credentials by mistake, in any verb, shows no secret.
func TestCredentialsPrintNoSecret(t *testing.T) {
	c := &oauth.Credentials{ClientID: "client-1", ClientSecret: "s3cret-client", AccessToken: "s3cret-access",
		RefreshToken: "s3cret-refresh", DPoPKey: []byte(`{"d":"s3cret-key"}`)}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{c, *c} {
			if out := fmt.Sprintf(f, v); strings.Contains(out, "s3cret") {
				t.Fatalf("%s of %T prints a secret: %s", f, v, out)
			}
		}
	}
}

// Update runs one fn at a time per key: concurrent refreshes of one key
// see each other's result (none is lost, no refresh token spent twice).
func TestMemStoreUpdateSerialized(t *testing.T) {
	s := oauth.NewMemStore()
	k := oauth.Key{Issuer: "https://as.example", Resource: "https://mcp.example/mcp"}
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Update(context.Background(), k, func(cur *oauth.Credentials) (*oauth.Credentials, error) {
				n := 0
				if cur != nil {
					fmt.Sscanf(cur.RefreshToken, "rt-%d", &n)
				}
				return &oauth.Credentials{RefreshToken: fmt.Sprintf("rt-%d", n+1)}, nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	c, _ := s.Load(context.Background(), k)
	if c.RefreshToken != "rt-20" {
		t.Fatalf("after 20 serialized rotations: %s, want rt-20", c.RefreshToken)
	}
	c.RefreshToken = "changed by the caller"
	if c2, _ := s.Load(context.Background(), k); c2.RefreshToken != "rt-20" {
		t.Fatal("Load shares memory with the store")
	}
	if _, err := s.Update(context.Background(), k, func(*oauth.Credentials) (*oauth.Credentials, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if c, _ := s.Load(context.Background(), k); c != nil {
		t.Fatal("nil from fn did not delete")
	}
}
