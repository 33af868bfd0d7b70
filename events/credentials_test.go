package events_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// tokenServer is a token endpoint that rotates refresh tokens: each one
// is good once; it counts the refreshes it answered and the reuses it
// refused.
type tokenServer struct {
	mu      sync.Mutex
	next    int
	spent   map[string]bool
	granted int
	reused  int
	// hold, when set, delays the first refresh until it is closed.
	hold chan struct{}
}

func (s *tokenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.PostForm.Get("grant_type") != "refresh_token" {
		http.Error(w, `{"error":"invalid_request"}`, http.StatusBadRequest)
		return
	}
	rt := r.PostForm.Get("refresh_token")
	s.mu.Lock()
	hold := s.hold
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		<-hold
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spent[rt] || !strings.HasPrefix(rt, "rt-") {
		s.reused++
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
		return
	}
	s.spent[rt] = true
	s.granted++
	s.next++
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("at-%d", s.next), "refresh_token": fmt.Sprintf("rt-%d", s.next), "token_type": "Bearer", "expires_in": 3600})
}

type testCreds struct {
	AccessToken  string    `json:"accessToken"`
	RefreshToken string    `json:"refreshToken"`
	Expiry       time.Time `json:"expiry"`
}

// refresh is an UpdateCredential function: it refreshes an expired access
// token at the token endpoint u and keeps a fresh one.
func refresh(ctx context.Context, u string) func(cur *events.Credential) (*events.Credential, error) {
	return func(cur *events.Credential) (*events.Credential, error) {
		var c testCreds
		if err := json.Unmarshal(cur.Secret, &c); err != nil {
			return nil, err
		}
		if time.Now().Before(c.Expiry) {
			return cur, nil
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {c.RefreshToken}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var tok struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
			ExpiresIn    int    `json:"expires_in"`
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("token endpoint: %s", resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
			return nil, err
		}
		c = testCreds{AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: time.Now().Add(time.Duration(tok.ExpiresIn) * time.Second)}
		b, _ := json.Marshal(c)
		return &events.Credential{CredentialInfo: events.CredentialInfo{Expiry: c.Expiry, TokenType: "Bearer", Scopes: []string{"read"}}, Secret: b}, nil
	}
}

func seedCreds(t *testing.T, db *events.DB, k events.CredentialKey, opts events.CredentialOptions, c testCreds) {
	t.Helper()
	b, _ := json.Marshal(c)
	if _, err := db.UpdateCredential(context.Background(), k, opts, func(*events.Credential) (*events.Credential, error) {
		return &events.Credential{CredentialInfo: events.CredentialInfo{Expiry: c.Expiry, Scopes: []string{"read"}}, Secret: b}, nil
	}); err != nil {
		t.Fatalf("seed: %v", err)
	}
}

// TestCredentials_ConcurrentRefreshSpendsOnce: workers on two handles of
// one database (two processes on SQLite, two workers on PostgreSQL) find
// the access token expired at once; the token endpoint is asked exactly
// once, the rotated refresh token is durable, and every worker gets the
// new access token.
func TestCredentials_ConcurrentRefreshSpendsOnce(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		ctx := context.Background()
		dsn := b.DSN(t)
		dbs := []*events.DB{testkit.OpenDB(t, dsn, events.Options{}), testkit.OpenDB(t, dsn, events.Options{})}
		opts := events.CredentialOptions{AllowPlaintext: true}
		k := events.CredentialKey{Issuer: "https://as.example", ClientID: "c1", Resource: "https://mcp.example/mcp"}
		seedCreds(t, dbs[0], k, opts, testCreds{AccessToken: "at-0", RefreshToken: "rt-0", Expiry: time.Now().Add(-time.Minute)})

		ts := &tokenServer{spent: map[string]bool{}, hold: make(chan struct{})}
		srv := httptest.NewServer(ts)
		defer srv.Close()
		const workers = 6
		var calling, done sync.WaitGroup
		calling.Add(workers)
		got := make([]string, workers)
		errs := make([]error, workers)
		hold := ts.hold
		for i := 0; i < workers; i++ {
			done.Add(1)
			go func(i int) {
				defer done.Done()
				calling.Done()
				c, err := dbs[i%2].UpdateCredential(ctx, k, opts, refresh(ctx, srv.URL))
				if err != nil {
					errs[i] = err
					return
				}
				var tc testCreds
				errs[i] = json.Unmarshal(c.Secret, &tc)
				got[i] = tc.AccessToken
			}(i)
		}
		calling.Wait() // every worker is calling UpdateCredential
		close(hold)    // the first refresh may answer now
		done.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("worker %d: %v", i, err)
			}
		}
		ts.mu.Lock()
		granted, reused := ts.granted, ts.reused
		ts.mu.Unlock()
		if granted != 1 || reused != 0 {
			t.Fatalf("token endpoint granted %d refreshes and refused %d reused refresh tokens; want 1 and 0", granted, reused)
		}
		for i, at := range got {
			if at != "at-1" {
				t.Fatalf("worker %d got access token %q; want at-1 (got %v)", i, at, got)
			}
		}
		c, err := dbs[1].LoadCredential(ctx, k)
		if err != nil || c == nil {
			t.Fatalf("load: %v, %v", c, err)
		}
		var tc testCreds
		_ = json.Unmarshal(c.Secret, &tc)
		if tc.RefreshToken != "rt-1" || len(c.Scopes) != 1 || c.Scopes[0] != "read" || c.Expiry.IsZero() {
			t.Fatalf("stored %+v / %+v; want the rotated refresh token rt-1, scope read, an expiry", tc, c.CredentialInfo)
		}
	})
}

// TestCredentials_PlaintextRefusedUnlessAllowed: without encryption a
// write fails naming the two ways out, and stores nothing.
func TestCredentials_PlaintextRefusedUnlessAllowed(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		ctx := context.Background()
		db := b.Open(t, events.Options{})
		k := events.CredentialKey{Issuer: "https://as.example", ClientID: "c1"}
		_, err := db.UpdateCredential(ctx, k, events.CredentialOptions{}, func(*events.Credential) (*events.Credential, error) {
			return &events.Credential{Secret: []byte(`{"accessToken":"tok-SECRET"}`)}, nil
		})
		if !errors.Is(err, events.ErrPlaintextCredentials) || !strings.Contains(err.Error(), "--allow-plaintext-credentials") || strings.Contains(err.Error(), "tok-SECRET") {
			t.Fatalf("err = %v; want ErrPlaintextCredentials naming the flag, without the token", err)
		}
		if c, err := db.LoadCredential(ctx, k); c != nil || err != nil {
			t.Fatalf("load after refusal = %v, %v; want nothing", c, err)
		}
		seedCreds(t, db, k, events.CredentialOptions{AllowPlaintext: true}, testCreds{AccessToken: "tok-SECRET"})
		list, err := db.ListCredentials(ctx)
		if err != nil || len(list) != 1 || list[0].Sealed || list[0].Key != k {
			t.Fatalf("list = %+v, %v; want one plaintext set for %v", list, err, k)
		}
		if n, err := db.DeleteCredentials(ctx, events.CredentialKey{Issuer: k.Issuer}); n != 1 || err != nil {
			t.Fatalf("delete = %d, %v; want 1", n, err)
		}
		if list, _ := db.ListCredentials(ctx); len(list) != 0 {
			t.Fatalf("after delete: %+v", list)
		}
	})
}

// TestCredentials_SealedOnDisk: with encryption on, no byte of a token is
// in the database file, its WAL or its shared memory, and a sealed value
// is bound to its key (moved to another row it does not open).
func TestCredentials_SealedOnDisk(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "enc.db")
	db := mustOpen(t, path)
	key, b64 := newKey(t)
	t.Setenv("AGENTCTL_KEY_K1", b64)
	if err := db.EnableEncryption(ctx, "k1", key); err != nil {
		t.Fatal(err)
	}
	const secret = "tok-7c1f0a9e-SECRET"
	k := events.CredentialKey{Issuer: "https://as.example", ClientID: "c1", Resource: "https://mcp.example/mcp"}
	seedCreds(t, db, k, events.CredentialOptions{}, testCreds{AccessToken: secret, RefreshToken: "rt-" + secret})
	c, err := db.LoadCredential(ctx, k)
	if err != nil || c == nil || !c.Sealed || !bytes.Contains(c.Secret, []byte(secret)) {
		t.Fatalf("load = %+v, %v; want the sealed set back", c, err)
	}
	// Move the sealed value to another key's row: it must not open.
	k2 := events.CredentialKey{Issuer: "https://evil.example", ClientID: "c1", Resource: k.Resource}
	seedCreds(t, db, k2, events.CredentialOptions{}, testCreds{AccessToken: "other"})
	if _, err := db.SQL().Exec(`UPDATE credentials SET secret = (SELECT secret FROM credentials WHERE issuer = ?) WHERE issuer = ?`, k.Issuer, k2.Issuer); err != nil {
		t.Fatal(err)
	}
	if _, err := db.LoadCredential(ctx, k2); err == nil {
		t.Fatal("a sealed value moved to another key's row opened")
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		b, err := os.ReadFile(path + suffix)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("7c1f0a9e")) {
			t.Fatalf("%s%s holds the token in clear", filepath.Base(path), suffix)
		}
	}
}
