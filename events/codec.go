package events

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Payload encryption (docs/ARCHITECTURE.md, "The event log").
//
// With encryption enabled, the payload of every protocol event (types
// "mcp.*", "call.*" and "session.*") and of every result (task.finished,
// run.finished; protectedType) is stored as an envelope
//
//	{"v":1,"alg":"AES-256-GCM","keyId":"dek-…","nonce":"…","ciphertext":"…"}
//
// sealed with AAD "events.payload"; run.created stays clear but for the
// value of its "inputs" member, sealed on its own (codec_member.go). The
// envelope's keyId names a random data
// key (DEK) that never changes, so rows written once stay readable forever
// and are never touched again (events is append-only). The DEK is kept in
// the settings table only wrapped (AES-256-GCM) by the operator's key (the
// KEK, identified by a key id). Rotation re-wraps the DEK under a new KEK:
// one settings row changes, no event row does. The hash chain covers the
// stored bytes, so `audit verify` needs no key.
//
// Fail closed: an envelope in a database without encryption, a plaintext
// protocol payload in a run recorded after encryption was enabled, or an
// envelope in a run recorded before it, are all errors (ErrMixedPayload).
// Runs recorded before encryption was enabled are listed in settings and
// stay plaintext.

// EnvelopeAlg is the only envelope algorithm.
const EnvelopeAlg = "AES-256-GCM"

// KeyEnvPrefix is where the CLI (and [Open], by default) finds the key of an
// encrypted database: the environment variable KeyEnvPrefix + the key id in
// upper case, other characters as "_" (key id "prod-1" → AGENTCTL_KEY_PROD_1).
const KeyEnvPrefix = "AGENTCTL_KEY_"

// Settings rows.
const (
	settingKEK        = "encryption.kek_id"
	settingDEK        = "encryption.dek"
	settingLegacyRuns = "encryption.plaintext_runs"
	payloadAAD        = "events.payload"
)

// Encryption errors; all reach callers inside an *Error (exit code 5).
var (
	ErrKeyRequired  = errors.New("encryption key required")
	ErrWrongKey     = errors.New("wrong encryption key")
	ErrMixedPayload = errors.New("plaintext and ciphertext mixed")
)

// keyIDPattern is what a key id may be, compiled on first use (its {0,63}
// made it the costliest regexp compiled at package init).
var keyIDPattern = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)
})

// KeyEnvName is the environment variable that holds the key of keyID.
func KeyEnvName(keyID string) string {
	return KeyEnvPrefix + strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, keyID)
}

// ParseKey decodes a base64 (standard or URL, padded or not) 32-byte key.
// The error never contains the value.
func ParseKey(b64 string) ([]byte, error) {
	s := strings.TrimSpace(b64)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != 32 {
				return nil, fmt.Errorf("key is %d bytes, want 32 (base64 of 32 random bytes)", len(k))
			}
			return k, nil
		}
	}
	return nil, errors.New("key is not base64")
}

type envelope struct {
	V          int    `json:"v"`
	Alg        string `json:"alg"`
	KeyID      string `json:"keyId"`
	Nonce      string `json:"nonce"`
	Ciphertext string `json:"ciphertext"`
}

const envelopePrefix = `{"v":1,"alg":"` + EnvelopeAlg + `",`

type wrappedDEK struct {
	DEKID   string `json:"dekId"`
	KEKID   string `json:"kekId"`
	Nonce   string `json:"nonce"`
	Wrapped string `json:"wrapped"`
}

// codec is the database's encryption state, shared by its events.
type codec struct {
	enabled bool
	kekID   string
	dek     wrappedDEK
	legacy  map[string]bool
	aead    cipher.AEAD // nil without the key
	dekKey  []byte      // the unwrapped data key (for rotation); never logged
	keyErr  error       // why aead is nil
}

// protectedType lists the sealed event types: every payload that carries
// remote data or workflow outputs. Protocol events ("mcp.*" frames,
// "call.*" with results and errors, "session.*" with server info and
// catalogs) and the results they feed: "task.finished" (a task's output and
// error) and "run.finished" (the workflow outputs and error). run.created,
// task.started, run.resumed and replay.frames stay clear: they hold the
// workflow as written, names and references, and `audit verify` reads the
// workflow digest from run.created without a key; run.created's inputs
// alone are sealed (sealedMember).
func protectedType(typ string) bool {
	return strings.HasPrefix(typ, "mcp.") || strings.HasPrefix(typ, "call.") || strings.HasPrefix(typ, "session.") || resultType(typ)
}

// resultType: types sealed since chain v2 (issue 13 item 8). Events of
// these types hashed with chain v1 were written by a binary that stored
// them in clear, and are read as written.
func resultType(typ string) bool { return typ == "task.finished" || typ == "run.finished" }

// clearByDesign reports a plaintext payload that was legitimately written
// in clear.
func (c *codec) clearByDesign(e Event) bool {
	return c == nil || !c.enabled || !protectedType(e.Type) || c.legacy[e.RunID] || (resultType(e.Type) && ChainVersion(e.Hash) == ChainV1)
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func wrapAAD(dekID, kekID string) []byte {
	return []byte("settings.encryption.dek|" + dekID + "|" + kekID)
}

// seal returns the envelope of payload for an event of runID.
func (c *codec) seal(runID, payload string) (string, error) {
	return c.sealAAD(runID, payload, []byte(payloadAAD))
}

// sealAAD is seal with the additional data aad.
func (c *codec) sealAAD(runID, payload string, aad []byte) (string, error) {
	if c.legacy[runID] {
		return "", fmt.Errorf("%w: run %s was recorded before encryption was enabled", ErrMixedPayload, runID)
	}
	if c.aead == nil {
		return "", c.keyErr
	}
	nonce := make([]byte, c.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	ct := c.aead.Seal(nil, nonce, []byte(payload), aad)
	b, err := json.Marshal(envelope{V: 1, Alg: EnvelopeAlg, KeyID: c.dek.DEKID, Nonce: base64.StdEncoding.EncodeToString(nonce), Ciphertext: base64.StdEncoding.EncodeToString(ct)})
	return string(b), err
}

// open returns the plaintext payload of e, enforcing fail-closed rules.
func (c *codec) open(e Event) (string, error) {
	isEnv := strings.HasPrefix(e.Payload, envelopePrefix)
	switch {
	case !isEnv && c.clearByDesign(e):
		if m := sealedMember(e.Type); m != "" {
			return c.openMember(e, m)
		}
		return e.Payload, nil
	case !isEnv:
		return "", fmt.Errorf("%w: plaintext %s payload in run %s of an encrypted database", ErrMixedPayload, e.Type, e.RunID)
	case c == nil:
		return "", fmt.Errorf("%w: %s payload is encrypted and this event carries no key", ErrKeyRequired, e.Type)
	case !c.enabled:
		return "", fmt.Errorf("%w: encrypted %s payload in a database without encryption", ErrMixedPayload, e.Type)
	case c.legacy[e.RunID]:
		return "", fmt.Errorf("%w: encrypted %s payload in run %s, recorded before encryption was enabled", ErrMixedPayload, e.Type, e.RunID)
	case c.aead == nil:
		return "", c.keyErr
	}
	return c.decrypt(e.Payload, []byte(payloadAAD))
}

// decrypt opens the envelope text payload, sealed with the additional data aad.
func (c *codec) decrypt(payload string, aad []byte) (string, error) {
	var env envelope
	if err := json.Unmarshal([]byte(payload), &env); err != nil {
		return "", fmt.Errorf("envelope: %w", err)
	}
	if env.KeyID != c.dek.DEKID {
		return "", fmt.Errorf("%w: envelope data key %q, database data key %q", ErrWrongKey, env.KeyID, c.dek.DEKID)
	}
	nonce, err1 := base64.StdEncoding.DecodeString(env.Nonce)
	ct, err2 := base64.StdEncoding.DecodeString(env.Ciphertext)
	if err1 != nil || err2 != nil || len(nonce) != c.aead.NonceSize() {
		return "", errors.New("envelope: bad nonce or ciphertext encoding")
	}
	pt, err := c.aead.Open(nil, nonce, ct, aad)
	if err != nil {
		return "", fmt.Errorf("envelope does not authenticate (tampered, or not sealed for %s)", aad)
	}
	return string(pt), nil
}

// loadCodec reads the encryption settings and, when enabled, unwraps the
// data key with the key lookup gives. A missing or wrong key is not an
// error here: it is reported by the first operation that needs the key.
func loadCodec(ctx context.Context, q sqlx.QueryerContext, lookup func(keyID string) string) (*codec, error) {
	c := &codec{legacy: map[string]bool{}}
	var kek string
	err := sqlx.GetContext(ctx, q, &kek, `SELECT value FROM settings WHERE name = ?`, settingKEK)
	if errors.Is(err, sql.ErrNoRows) {
		return c, nil
	}
	if err != nil {
		return nil, err
	}
	var dek, legacy string
	if err := sqlx.GetContext(ctx, q, &dek, `SELECT value FROM settings WHERE name = ?`, settingDEK); err != nil {
		return nil, fmt.Errorf("encryption settings: data key: %w", err)
	}
	if err := sqlx.GetContext(ctx, q, &legacy, `SELECT value FROM settings WHERE name = ?`, settingLegacyRuns); err != nil {
		return nil, fmt.Errorf("encryption settings: plaintext runs: %w", err)
	}
	c.enabled, c.kekID = true, kek
	if err := json.Unmarshal([]byte(dek), &c.dek); err != nil {
		return nil, fmt.Errorf("encryption settings: data key: %w", err)
	}
	var runs []string
	if err := json.Unmarshal([]byte(legacy), &runs); err != nil {
		return nil, fmt.Errorf("encryption settings: plaintext runs: %w", err)
	}
	for _, r := range runs {
		c.legacy[r] = true
	}
	if lookup == nil {
		lookup = func(id string) string { return os.Getenv(KeyEnvName(id)) }
	}
	raw := lookup(kek)
	if raw == "" {
		c.keyErr = fmt.Errorf("%w: the database is encrypted with key id %q; set %s to its base64 key", ErrKeyRequired, kek, KeyEnvName(kek))
		return c, nil
	}
	key, err := ParseKey(raw)
	if err != nil {
		c.keyErr = fmt.Errorf("%w: %s: %v", ErrWrongKey, KeyEnvName(kek), err)
		return c, nil
	}
	if c.aead, c.dekKey, err = c.dek.unwrap(key); err != nil {
		c.keyErr = fmt.Errorf("%w: %s does not hold the key %q", ErrWrongKey, KeyEnvName(kek), kek)
	}
	return c, nil
}

func (w wrappedDEK) unwrap(kek []byte) (cipher.AEAD, []byte, error) {
	a, err := newAEAD(kek)
	if err != nil {
		return nil, nil, err
	}
	nonce, err1 := base64.StdEncoding.DecodeString(w.Nonce)
	ct, err2 := base64.StdEncoding.DecodeString(w.Wrapped)
	if err1 != nil || err2 != nil || len(nonce) != a.NonceSize() {
		return nil, nil, errors.New("bad wrapped data key encoding")
	}
	dek, err := a.Open(nil, nonce, ct, wrapAAD(w.DEKID, w.KEKID))
	if err != nil {
		return nil, nil, ErrWrongKey
	}
	d, err := newAEAD(dek)
	return d, dek, err
}

func wrap(dekID, kekID string, dek, kek []byte) (wrappedDEK, error) {
	a, err := newAEAD(kek)
	if err != nil {
		return wrappedDEK{}, err
	}
	nonce := make([]byte, a.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return wrappedDEK{}, err
	}
	ct := a.Seal(nil, nonce, dek, wrapAAD(dekID, kekID))
	return wrappedDEK{DEKID: dekID, KEKID: kekID, Nonce: base64.StdEncoding.EncodeToString(nonce), Wrapped: base64.StdEncoding.EncodeToString(ct)}, nil
}
