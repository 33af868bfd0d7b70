package workflow

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/transport/oauth"
)

// CredentialStore is the oauth.Store of a database: the credentials table
// (events/credentials.go), sealed with the database key when encryption is
// on. Update is one transaction under the key's lock (BEGIN IMMEDIATE on
// SQLite, SELECT … FOR UPDATE on PostgreSQL), committed before it returns:
// a rotated refresh token is durable before the access token is used, and
// two workers never spend one refresh token.
type CredentialStore struct {
	DB *events.DB
	// AllowPlaintext stores credentials in clear in a database without
	// encryption (--allow-plaintext-credentials); else such a write fails.
	AllowPlaintext bool
}

var _ oauth.Store = CredentialStore{}

func credKey(k oauth.Key) events.CredentialKey {
	return events.CredentialKey{Issuer: k.Issuer, ClientID: k.ClientID, Resource: k.Resource}
}

// decodeCreds reads a stored secret; the error never quotes it.
func decodeCreds(c *events.Credential) (*oauth.Credentials, error) {
	if c == nil {
		return nil, nil
	}
	var oc oauth.Credentials
	if err := json.Unmarshal(c.Secret, &oc); err != nil {
		return nil, fmt.Errorf("credentials for %s: stored value does not decode", c.Key.Issuer)
	}
	return &oc, nil
}

// Load implements oauth.Store.
func (s CredentialStore) Load(ctx context.Context, k oauth.Key) (*oauth.Credentials, error) {
	c, err := s.DB.LoadCredential(ctx, credKey(k))
	if err != nil {
		return nil, err
	}
	return decodeCreds(c)
}

// Update implements oauth.Store.
func (s CredentialStore) Update(ctx context.Context, k oauth.Key, fn func(cur *oauth.Credentials) (*oauth.Credentials, error)) (*oauth.Credentials, error) {
	var out *oauth.Credentials
	_, err := s.DB.UpdateCredential(ctx, credKey(k), events.CredentialOptions{AllowPlaintext: s.AllowPlaintext}, func(cur *events.Credential) (*events.Credential, error) {
		oc, err := decodeCreds(cur)
		if err != nil {
			return nil, err
		}
		next, err := fn(oc)
		if err != nil || next == nil {
			return nil, err
		}
		b, err := json.Marshal(next)
		if err != nil {
			return nil, err
		}
		out = next
		return &events.Credential{CredentialInfo: events.CredentialInfo{Scopes: next.Scopes, TokenType: next.TokenType, Expiry: next.Expiry}, Secret: b}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
