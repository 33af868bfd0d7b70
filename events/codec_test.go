package events_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
)

func newKey(t *testing.T) ([]byte, string) {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k, base64.StdEncoding.EncodeToString(k)
}

const secretFrame = `{"dir":"in","kind":"response","body":{"result":"top secret payload"}}`

type frame struct {
	Dir  string         `json:"dir"`
	Kind string         `json:"kind"`
	Body map[string]any `json:"body"`
}

// encryptedDB opens a database, records a plaintext run, enables encryption
// with key id k1 and records an encrypted run.
func encryptedDB(t *testing.T) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "enc.db")
	db := mustOpen(t, path)
	ctx := context.Background()
	rec := []events.Record{{Stream: "run", Type: "run.created", Payload: map[string]string{"digest": "d"}}, {Stream: "call/x", Type: "mcp.response", Payload: []byte(secretFrame)}, {Stream: "run", Type: "run.finished"}}
	if _, err := db.Append(ctx, "run-plain", rec, nil); err != nil {
		t.Fatal(err)
	}
	key, b64 := newKey(t)
	t.Setenv("AGENTCTL_KEY_K1", b64)
	if err := db.EnableEncryption(ctx, "k1", key); err != nil {
		t.Fatalf("enable: %v", err)
	}
	if _, err := db.Append(ctx, "run-enc", rec, nil); err != nil {
		t.Fatalf("append encrypted: %v", err)
	}
	_ = db.Close()
	return path, key
}

func decodeFrame(db *events.DB, run string) (frame, error) {
	evs, err := db.Events(context.Background(), run)
	if err != nil {
		return frame{}, err
	}
	var f frame
	err = evs[1].Decode(&f)
	return f, err
}

func TestCodec_RoundTripAndStoredForm(t *testing.T) {
	path, _ := encryptedDB(t)
	db := mustOpen(t, path)
	for _, run := range []string{"run-plain", "run-enc"} {
		f, err := decodeFrame(db, run)
		if err != nil || f.Body["result"] != "top secret payload" {
			t.Fatalf("%s: decoded %+v, %v", run, f, err)
		}
	}
	var stored []string
	if err := db.SQL().Select(&stored, `SELECT payload FROM events WHERE run_id = 'run-enc' ORDER BY seq`); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stored[1], `{"v":1,"alg":"AES-256-GCM","keyId":"dek-`) || strings.Contains(stored[1], "secret") {
		t.Fatalf("stored frame payload = %s, want an envelope", stored[1])
	}
	if stored[0] != `{"digest":"d"}` {
		t.Fatalf("run.created is not a protocol payload and stays clear: %s", stored[0])
	}
	if st := db.Encryption(); !st.Enabled || st.KeyID != "k1" || !st.KeyOK || st.PlaintextRuns != 1 || st.KeyEnv != "AGENTCTL_KEY_K1" {
		t.Fatalf("status = %+v", st)
	}
}

func TestCodec_MissingAndWrongKey(t *testing.T) {
	path, key := encryptedDB(t)
	for _, tc := range []struct {
		name, env string
		want      error
	}{
		{"missing", "", events.ErrKeyRequired},
		{"wrong", base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, 32)), events.ErrWrongKey},
		{"not 32 bytes", base64.StdEncoding.EncodeToString(key[:16]), events.ErrWrongKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("AGENTCTL_KEY_K1", tc.env)
			db := mustOpen(t, path)
			_, err := decodeFrame(db, "run-enc")
			var se *events.Error
			if !errors.Is(err, tc.want) || !errors.As(err, &se) {
				t.Fatalf("decode err = %v, want %v inside *events.Error", err, tc.want)
			}
			if tc.env != "" && strings.Contains(err.Error(), tc.env) {
				t.Fatalf("error leaks the key: %v", err)
			}
			if _, err := db.Append(context.Background(), "run-new", []events.Record{{Stream: "s", Type: "session.opened", Payload: map[string]int{}}}, nil); !errors.Is(err, tc.want) {
				t.Fatalf("append without the key: %v, want %v", err, tc.want)
			}
			// Plaintext runs and the chain stay readable without the key.
			if f, err := decodeFrame(db, "run-plain"); err != nil || f.Kind != "response" {
				t.Fatalf("plaintext run: %+v, %v", f, err)
			}
			if n, err := db.VerifyRun(context.Background(), "run-enc"); err != nil || n != 3 {
				t.Fatalf("verify without key = %d, %v", n, err)
			}
			var buf bytes.Buffer
			if _, err := db.Export(context.Background(), &buf, "run-enc"); err != nil {
				t.Fatal(err)
			}
			if n, _, err := events.VerifyStream(&buf); err != nil || n != 3 {
				t.Fatalf("audit verify without key = %d, %v", n, err)
			}
		})
	}
}

func TestCodec_MixedPayloadsFailClosed(t *testing.T) {
	path, _ := encryptedDB(t)
	db := mustOpen(t, path)
	ctx := context.Background()
	var envPayload string
	if err := db.SQL().Get(&envPayload, `SELECT payload FROM events WHERE run_id = 'run-enc' AND seq = 2`); err != nil {
		t.Fatal(err)
	}
	// Raw inserts with valid hashes: the chain is fine, the mix is not.
	insert := func(db *events.DB, run string, payloads ...string) {
		t.Helper()
		prev := ""
		for i, p := range payloads {
			seq := int64(i + 1)
			typ := "mcp.response"
			if i == 0 {
				typ = "run.created"
			}
			h := events.ComputeHash(prev, run, seq, "s", typ, p)
			if _, err := db.SQL().Exec(`INSERT INTO events (run_id, seq, stream, type, payload, created_at, prev_hash, hash) VALUES (?, ?, 's', ?, ?, 'now', ?, ?)`, run, seq, typ, p, prev, h); err != nil {
				t.Fatal(err)
			}
			prev = h
		}
	}
	insert(db, "run-sneaky", `{}`, secretFrame)
	if _, err := decodeFrame(db, "run-sneaky"); !errors.Is(err, events.ErrMixedPayload) {
		t.Fatalf("plaintext frame in an encrypted db: %v, want ErrMixedPayload", err)
	}
	evs, _ := db.Events(ctx, "run-plain")
	if err := evs[1].Decode(&frame{}); err != nil {
		t.Fatalf("legacy plaintext run: %v", err)
	}
	// The reverse: an envelope in a database that never enabled encryption.
	plain := mustOpen(t, filepath.Join(t.TempDir(), "plain.db"))
	insert(plain, "run-x", `{}`, envPayload)
	if _, err := decodeFrame(plain, "run-x"); !errors.Is(err, events.ErrMixedPayload) {
		t.Fatalf("envelope in a plaintext db: %v, want ErrMixedPayload", err)
	}
}

func TestCodec_RotateKeepsEventsAndRetiresOldKey(t *testing.T) {
	path, _ := encryptedDB(t)
	db := mustOpen(t, path)
	var before []string
	if err := db.SQL().Select(&before, `SELECT hash FROM events ORDER BY run_id, seq`); err != nil {
		t.Fatal(err)
	}
	k2, b64 := newKey(t)
	if err := db.RotateKey(context.Background(), "k2", k2); err != nil {
		t.Fatalf("rotate: %v", err)
	}
	_ = db.Close()
	t.Setenv("AGENTCTL_KEY_K2", b64)
	db = mustOpen(t, path)
	if f, err := decodeFrame(db, "run-enc"); err != nil || f.Body["result"] != "top secret payload" {
		t.Fatalf("after rotation: %+v, %v", f, err)
	}
	var after []string
	if err := db.SQL().Select(&after, `SELECT hash FROM events ORDER BY run_id, seq`); err != nil {
		t.Fatal(err)
	}
	if strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatal("rotation changed event rows")
	}
	// The old key (still in AGENTCTL_KEY_K1) no longer opens anything: k2 is the key id now.
	t.Setenv("AGENTCTL_KEY_K2", os.Getenv("AGENTCTL_KEY_K1"))
	db2 := mustOpen(t, path)
	if _, err := decodeFrame(db2, "run-enc"); !errors.Is(err, events.ErrWrongKey) {
		t.Fatalf("old key after rotation: %v, want ErrWrongKey", err)
	}
}

func TestCodec_EnableRefusesOpenRunsAndTwice(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	if _, err := db.Append(ctx, "run-open", []events.Record{{Stream: "run", Type: "run.created"}}, nil); err != nil {
		t.Fatal(err)
	}
	key, _ := newKey(t)
	if err := db.EnableEncryption(ctx, "k1", key); !errors.Is(err, events.ErrEncryption) || !strings.Contains(err.Error(), "run-open") {
		t.Fatalf("enable with an open run: %v", err)
	}
	if _, err := db.Append(ctx, "run-open", []events.Record{{Stream: "run", Type: "run.finished"}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.EnableEncryption(ctx, "bad id!", key); !errors.Is(err, events.ErrEncryption) {
		t.Fatalf("bad key id: %v", err)
	}
	if err := db.EnableEncryption(ctx, "k1", key); err != nil {
		t.Fatal(err)
	}
	if err := db.EnableEncryption(ctx, "k1", key); !errors.Is(err, events.ErrEncryption) {
		t.Fatalf("enable twice: %v", err)
	}
}
