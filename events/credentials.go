package events

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentctl/agentctl/migrations"
)

// Credentials (issue 31): the OAuth tokens, refresh tokens, DPoP keys and
// registered client secrets agentctl keeps for MCP servers. They live in
// their own table, never in events. The secret part is an opaque byte
// string to this package (the caller's JSON); with encryption on it is
// sealed with the database's data key under the additional data
// "credentials|<issuer>|<client>|<resource>", so a sealed value cannot be
// moved to another key's row. With encryption off a write is refused
// (ErrPlaintextCredentials) unless the caller allows plaintext: then anyone
// who can read the database file can read and use the tokens until they
// expire, and the refresh token until the authorization server revokes it.
//
// UpdateCredential is one write transaction per call (BEGIN IMMEDIATE on
// SQLite, SELECT … FOR UPDATE of the key's row on PostgreSQL) around the
// caller's function, committed before it returns: a refresh that rotates
// the refresh token has the new one on disk before the access token is
// used, and two processes (or workers) never spend one refresh token.

// ErrPlaintextCredentials refuses to store credentials in clear in a
// database without encryption, unless the operator opted in.
var ErrPlaintextCredentials = errors.New("credentials: the database is not encrypted")

// CredentialKey names one credential set: the authorization server
// (issuer), the client and the protected resource. None of it is secret.
type CredentialKey struct {
	Issuer, ClientID, Resource string
}

// CredentialInfo is what may be shown of a credential set: no secret.
type CredentialInfo struct {
	Key       CredentialKey
	Scopes    []string
	TokenType string
	Expiry    time.Time // zero when unknown
	Sealed    bool
	UpdatedAt time.Time
}

// Credential is a credential set: its info and its secret bytes.
type Credential struct {
	CredentialInfo
	// Secret is the caller's encoding of the secrets (never logged).
	Secret []byte
}

// CredentialOptions tune UpdateCredential.
type CredentialOptions struct {
	// AllowPlaintext stores the secret in clear when the database is not
	// encrypted (--allow-plaintext-credentials); else such a write fails
	// with ErrPlaintextCredentials.
	AllowPlaintext bool
}

// credLocks serialises Updates of one key inside the process; the
// database serialises them across processes.
type credLocks struct {
	mu sync.Mutex
	m  map[CredentialKey]*sync.Mutex
}

func (l *credLocks) lock(k CredentialKey) func() {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[CredentialKey]*sync.Mutex{}
	}
	m := l.m[k]
	if m == nil {
		m = &sync.Mutex{}
		l.m[k] = m
	}
	l.mu.Unlock()
	m.Lock()
	return m.Unlock
}

func credAAD(k CredentialKey) []byte {
	return []byte("credentials|" + k.Issuer + "|" + k.ClientID + "|" + k.Resource)
}

type credRow struct {
	Issuer    string         `db:"issuer"`
	ClientID  string         `db:"client_id"`
	Resource  string         `db:"resource"`
	Sealed    int            `db:"sealed"`
	Secret    sql.NullString `db:"secret"`
	Scopes    string         `db:"scopes"`
	TokenType string         `db:"token_type"`
	ExpiresAt string         `db:"expires_at"`
	UpdatedAt string         `db:"updated_at"`
}

const credTime = time.RFC3339Nano

func (r credRow) info() CredentialInfo {
	in := CredentialInfo{Key: CredentialKey{r.Issuer, r.ClientID, r.Resource}, TokenType: r.TokenType, Sealed: r.Sealed == 1}
	if r.Scopes != "" {
		in.Scopes = strings.Fields(r.Scopes)
	}
	in.Expiry, _ = time.Parse(credTime, r.ExpiresAt)
	in.UpdatedAt, _ = time.Parse(credTime, r.UpdatedAt)
	return in
}

// open returns the credential of r, nil for an empty row.
func (db *DB) openCred(r credRow) (*Credential, error) {
	if !r.Secret.Valid {
		return nil, nil
	}
	c := &Credential{CredentialInfo: r.info()}
	if r.Sealed == 0 {
		// Stored in clear by an operator's opt-in, possibly before
		// encryption was enabled: readable; the next update seals it.
		c.Secret = []byte(r.Secret.String)
		return c, nil
	}
	db.wmu.Lock()
	enc := db.enc
	db.wmu.Unlock()
	switch {
	case !enc.enabled:
		return nil, fmt.Errorf("%w: sealed credentials for %s in a database without encryption", ErrMixedPayload, r.Issuer)
	case enc.aead == nil:
		return nil, enc.keyErr
	}
	pt, err := enc.decrypt(r.Secret.String, credAAD(c.Key))
	if err != nil {
		return nil, fmt.Errorf("credentials for %s: %w", r.Issuer, err)
	}
	c.Secret = []byte(pt)
	return c, nil
}

const credColumns = `issuer, client_id, resource, sealed, secret, scopes, token_type, expires_at, updated_at`

// LoadCredential returns the credential set of k, nil when there is none.
func (db *DB) LoadCredential(ctx context.Context, k CredentialKey) (*Credential, error) {
	var r credRow
	err := db.x.GetContext(ctx, &r, `SELECT `+credColumns+` FROM credentials WHERE issuer = ? AND client_id = ? AND resource = ?`, k.Issuer, k.ClientID, k.Resource)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, &Error{Op: "load credentials", Path: db.path, Err: classify(err)}
	}
	c, err := db.openCred(r)
	if err != nil {
		return nil, &Error{Op: "load credentials", Path: db.path, Err: err}
	}
	return c, nil
}

// UpdateCredential runs fn with the current credential set of k (nil when
// none) under the key's lock and stores what it returns (nil deletes the
// secret), committed before UpdateCredential returns it. An error from fn
// rolls back and is returned as is. fn may do network I/O (a refresh):
// on SQLite the database's write lock is held meanwhile, so appends of
// other runs wait for it (within the busy timeout).
func (db *DB) UpdateCredential(ctx context.Context, k CredentialKey, opts CredentialOptions, fn func(cur *Credential) (*Credential, error)) (*Credential, error) {
	unlock := db.creds.lock(k)
	defer unlock()
	tx, err := db.x.BeginTxx(ctx, nil) // BEGIN IMMEDIATE on SQLite (_txlock)
	if err != nil {
		return nil, &Error{Op: "update credentials", Path: db.path, Err: classify(err)}
	}
	defer func() { _ = tx.Rollback() }()
	now := db.Now().UTC().Format(credTime)
	if _, err := tx.ExecContext(ctx, `INSERT INTO credentials (issuer, client_id, resource, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING`, k.Issuer, k.ClientID, k.Resource, now); err != nil {
		return nil, &Error{Op: "update credentials", Path: db.path, Err: classify(err)}
	}
	q := `SELECT ` + credColumns + ` FROM credentials WHERE issuer = ? AND client_id = ? AND resource = ?`
	if db.backend == migrations.Postgres {
		q += ` FOR UPDATE`
	}
	var r credRow
	if err := tx.GetContext(ctx, &r, q, k.Issuer, k.ClientID, k.Resource); err != nil {
		return nil, &Error{Op: "update credentials", Path: db.path, Err: classify(err)}
	}
	cur, err := db.openCred(r)
	if err != nil {
		return nil, &Error{Op: "update credentials", Path: db.path, Err: err}
	}
	next, err := fn(cur)
	if err != nil {
		return nil, err
	}
	row, err := db.sealCred(k, next, opts)
	if err != nil {
		return nil, &Error{Op: "update credentials", Path: db.path, Err: err}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE credentials SET sealed = ?, secret = ?, scopes = ?, token_type = ?, expires_at = ?, updated_at = ? WHERE issuer = ? AND client_id = ? AND resource = ?`,
		row.Sealed, row.Secret, row.Scopes, row.TokenType, row.ExpiresAt, now, k.Issuer, k.ClientID, k.Resource); err != nil {
		return nil, &Error{Op: "update credentials", Path: db.path, Err: classify(err)}
	}
	if err := tx.Commit(); err != nil {
		return nil, &Error{Op: "update credentials: commit", Path: db.path, Err: classify(err)}
	}
	if next != nil {
		next.Key, next.Sealed = k, row.Sealed == 1
	}
	return next, nil
}

// sealCred encodes c for its row: sealed when encryption is on.
func (db *DB) sealCred(k CredentialKey, c *Credential, opts CredentialOptions) (credRow, error) {
	if c == nil {
		return credRow{}, nil
	}
	r := credRow{Scopes: strings.Join(c.Scopes, " "), TokenType: c.TokenType}
	if !c.Expiry.IsZero() {
		r.ExpiresAt = c.Expiry.UTC().Format(credTime)
	}
	db.wmu.Lock()
	enc := db.enc
	db.wmu.Unlock()
	if !enc.enabled {
		if !opts.AllowPlaintext {
			return credRow{}, fmt.Errorf("%w: enable encryption (agentctl db encryption enable) or pass --allow-plaintext-credentials to store tokens for %s in clear", ErrPlaintextCredentials, k.Issuer)
		}
		r.Secret = sql.NullString{String: string(c.Secret), Valid: true}
		return r, nil
	}
	if enc.aead == nil {
		return credRow{}, enc.keyErr
	}
	s, err := enc.sealAAD("", string(c.Secret), credAAD(k))
	if err != nil {
		return credRow{}, err
	}
	r.Sealed, r.Secret = 1, sql.NullString{String: s, Valid: true}
	return r, nil
}

// ListCredentials lists the stored credential sets, without their
// secrets, ordered by issuer, client and resource.
func (db *DB) ListCredentials(ctx context.Context) ([]CredentialInfo, error) {
	var rows []credRow
	if err := db.x.SelectContext(ctx, &rows, `SELECT `+credColumns+` FROM credentials WHERE secret IS NOT NULL ORDER BY issuer, client_id, resource`); err != nil {
		return nil, &Error{Op: "list credentials", Path: db.path, Err: classify(err)}
	}
	out := make([]CredentialInfo, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.info())
	}
	return out, nil
}

// DeleteCredentials forgets the credential sets matching match (a field
// left empty matches any value) and returns how many were forgotten.
func (db *DB) DeleteCredentials(ctx context.Context, match CredentialKey) (int, error) {
	res, err := db.x.ExecContext(ctx, `DELETE FROM credentials WHERE secret IS NOT NULL AND (? = '' OR issuer = ?) AND (? = '' OR client_id = ?) AND (? = '' OR resource = ?)`,
		match.Issuer, match.Issuer, match.ClientID, match.ClientID, match.Resource, match.Resource)
	if err != nil {
		return 0, &Error{Op: "delete credentials", Path: db.path, Err: classify(err)}
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
