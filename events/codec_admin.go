package events

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrEncryption reports a refused encryption change (already enabled, a run
// still open, a bad key id).
var ErrEncryption = errors.New("encryption")

// EncryptionStatus describes a database's payload encryption.
type EncryptionStatus struct {
	Enabled bool   `json:"enabled"`
	KeyID   string `json:"keyId,omitempty"`   // the operator key (KEK) id wrapping the data key
	DataKey string `json:"dataKey,omitempty"` // the data key id named by envelopes
	KeyEnv  string `json:"keyEnv,omitempty"`  // where reads look for the key
	KeyOK   bool   `json:"keyLoaded"`         // the key was found and unwraps the data key
	// PlaintextRuns counts runs recorded before encryption was enabled.
	PlaintextRuns int `json:"plaintextRuns"`
}

// Encryption reports the database's encryption state; it needs no key.
func (db *DB) Encryption() EncryptionStatus {
	db.wmu.Lock()
	defer db.wmu.Unlock()
	c := db.enc
	if !c.enabled {
		return EncryptionStatus{}
	}
	return EncryptionStatus{Enabled: true, KeyID: c.kekID, DataKey: c.dek.DEKID, KeyEnv: KeyEnvName(c.kekID), KeyOK: c.aead != nil, PlaintextRuns: len(c.legacy)}
}

// EnableEncryption turns payload encryption on: a random data key is made,
// wrapped by kek (32 bytes) under keyID, and stored in settings. Every run
// already in the log must be finished; those runs stay plaintext. From the
// next Append on, protocol payloads are sealed.
func (db *DB) EnableEncryption(ctx context.Context, keyID string, kek []byte) error {
	if !keyIDPattern().MatchString(keyID) {
		return &Error{Op: "enable encryption", Path: db.path, Err: fmt.Errorf("%w: key id %q: want 1-64 of [A-Za-z0-9_-], starting alphanumeric", ErrEncryption, keyID)}
	}
	if len(kek) != 32 {
		return &Error{Op: "enable encryption", Path: db.path, Err: fmt.Errorf("%w: key is %d bytes, want 32", ErrEncryption, len(kek))}
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	if db.enc.enabled {
		return &Error{Op: "enable encryption", Path: db.path, Err: fmt.Errorf("%w: already enabled with key id %q (use rotate)", ErrEncryption, db.enc.kekID)}
	}
	dek := make([]byte, 32)
	idb := make([]byte, 8)
	if _, err := rand.Read(dek); err != nil {
		return err
	}
	if _, err := rand.Read(idb); err != nil {
		return err
	}
	w, err := wrap("dek-"+hex.EncodeToString(idb), keyID, dek, kek)
	if err != nil {
		return err
	}
	err = db.settingsTx(ctx, func(tx *Tx, now string) error {
		var open []string
		if err := tx.SelectContext(ctx, &open, `SELECT run_id FROM events WHERE seq = 1 AND run_id NOT IN (SELECT run_id FROM events WHERE type = 'run.finished') ORDER BY run_id LIMIT 5`); err != nil {
			return err
		}
		if len(open) > 0 {
			return fmt.Errorf("%w: runs not finished (resume or reconcile them first): %v", ErrEncryption, open)
		}
		runs := []string{}
		if err := tx.SelectContext(ctx, &runs, `SELECT run_id FROM events WHERE seq = 1 ORDER BY run_id`); err != nil {
			return err
		}
		legacy, _ := json.Marshal(runs)
		dekJSON, _ := json.Marshal(w)
		for _, kv := range [][2]string{{settingKEK, keyID}, {settingDEK, string(dekJSON)}, {settingLegacyRuns, string(legacy)}} {
			if _, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)`, kv[0], kv[1], now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return &Error{Op: "enable encryption", Path: db.path, Err: classify(err)}
	}
	return db.reloadLocked(ctx, func(string) string { return "" }, dek)
}

// RotateKey re-wraps the data key under newKEK (id newKeyID). The current
// key must be loaded. No event row changes; every existing envelope stays
// readable with the new key, and the old key stops working.
func (db *DB) RotateKey(ctx context.Context, newKeyID string, newKEK []byte) error {
	if !keyIDPattern().MatchString(newKeyID) {
		return &Error{Op: "rotate key", Path: db.path, Err: fmt.Errorf("%w: key id %q: want 1-64 of [A-Za-z0-9_-], starting alphanumeric", ErrEncryption, newKeyID)}
	}
	if len(newKEK) != 32 {
		return &Error{Op: "rotate key", Path: db.path, Err: fmt.Errorf("%w: key is %d bytes, want 32", ErrEncryption, len(newKEK))}
	}
	db.wmu.Lock()
	defer db.wmu.Unlock()
	c := db.enc
	switch {
	case !c.enabled:
		return &Error{Op: "rotate key", Path: db.path, Err: fmt.Errorf("%w: not enabled", ErrEncryption)}
	case c.aead == nil:
		return &Error{Op: "rotate key", Path: db.path, Err: c.keyErr}
	}
	w, err := wrap(c.dek.DEKID, newKeyID, c.dekKey, newKEK)
	if err != nil {
		return err
	}
	dekJSON, _ := json.Marshal(w)
	err = db.settingsTx(ctx, func(tx *Tx, now string) error {
		for _, kv := range [][2]string{{settingKEK, newKeyID}, {settingDEK, string(dekJSON)}} {
			if _, err := tx.ExecContext(ctx, `UPDATE settings SET value = ?, updated_at = ? WHERE name = ?`, kv[1], now, kv[0]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return &Error{Op: "rotate key", Path: db.path, Err: classify(err)}
	}
	return db.reloadLocked(ctx, nil, c.dekKey)
}

func (db *DB) settingsTx(ctx context.Context, fn func(tx *Tx, now string) error) error {
	tx, err := db.x.BeginTxx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := fn(tx, db.Now().UTC().Format("2006-01-02T15:04:05.999999999Z07:00")); err != nil {
		return err
	}
	return tx.Commit()
}

// reloadLocked re-reads the settings and installs dek (already known to
// the caller) as the data key.
func (db *DB) reloadLocked(ctx context.Context, lookup func(string) string, dek []byte) error {
	c, err := loadCodec(ctx, db.x, lookup)
	if err != nil {
		return &Error{Op: "reload encryption settings", Path: db.path, Err: err}
	}
	if c.aead, err = newAEAD(dek); err != nil {
		return err
	}
	c.dekKey, c.keyErr = dek, nil
	db.enc = c
	return nil
}
