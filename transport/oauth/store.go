package oauth

import (
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// Key names one credential set: the authorization server (issuer), the
// client and the resource.
type Key struct{ Issuer, ClientID, Resource string }

// Credentials are the secrets of one Key: never logged, never in events.
type Credentials struct {
	ClientID, ClientSecret               string // registered (DCR) or pre-registered
	AccessToken, RefreshToken, TokenType string
	Expiry                               time.Time
	Scopes                               []string
	DPoPKey                              json.RawMessage // private JWK, when DPoP is used
}

// clone returns a deep copy of c (nil for nil), so a Store never shares
// memory with its callers.
func (c *Credentials) clone() *Credentials {
	if c == nil {
		return nil
	}
	d := *c
	d.Scopes = slices.Clone(c.Scopes)
	d.DPoPKey = slices.Clone(c.DPoPKey)
	return &d
}

// String hides every secret: a Credentials printed by mistake (%v, %+v,
// %s) shows only which fields are set.
func (c Credentials) String() string {
	return "<credentials client=" + c.ClientID + " access=" + set(c.AccessToken) + " refresh=" + set(c.RefreshToken) +
		" secret=" + set(c.ClientSecret) + " dpop=" + set(string(c.DPoPKey)) + ">"
}

// GoString hides every secret (%#v), like String.
func (c Credentials) GoString() string { return c.String() }

func set(s string) string {
	if s == "" {
		return "none"
	}
	return "set"
}

// Store keeps Credentials durable; Update runs fn under a per-Key lock (a
// row lock on PostgreSQL) and commits what fn returns before returning it,
// so a rotated refresh token is durable before the access token is used and
// two workers never spend one refresh token. fn receives nil when the Key
// has no credentials; returning nil, nil from fn deletes them.
type Store interface {
	Load(ctx context.Context, k Key) (*Credentials, error) // nil, nil when none
	Update(ctx context.Context, k Key, fn func(cur *Credentials) (*Credentials, error)) (*Credentials, error)
}

// MemStore is an in-memory Store for tests and one-shot commands.
type MemStore struct {
	mu    sync.Mutex // guards m and locks
	m     map[Key]*Credentials
	locks map[Key]*sync.Mutex
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore {
	return &MemStore{m: map[Key]*Credentials{}, locks: map[Key]*sync.Mutex{}}
}

// Load returns a copy of k's credentials, nil when none.
func (s *MemStore) Load(_ context.Context, k Key) (*Credentials, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[k].clone(), nil
}

// Update runs fn under k's lock and stores its result (deleting on nil).
func (s *MemStore) Update(ctx context.Context, k Key, fn func(cur *Credentials) (*Credentials, error)) (*Credentials, error) {
	s.mu.Lock()
	l := s.locks[k]
	if l == nil {
		l = &sync.Mutex{}
		s.locks[k] = l
	}
	s.mu.Unlock()
	l.Lock()
	defer l.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	cur := s.m[k].clone()
	s.mu.Unlock()
	next, err := fn(cur)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if next == nil {
		delete(s.m, k)
		return nil, nil
	}
	s.m[k] = next.clone()
	return next.clone(), nil
}

// Keys lists the stored keys (for tests and status listings).
func (s *MemStore) Keys() []Key {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]Key, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	return keys
}
