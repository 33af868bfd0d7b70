package events_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
)

const inputCanary = "input-canary-3b9e1d-private"

type created struct {
	RunID  string         `json:"runId"`
	Digest string         `json:"digest"`
	Inputs map[string]any `json:"inputs"`
}

// TestCodec_RunCreatedInputsSealed (issue 27 item 9): with encryption on,
// run.created keeps its members in clear but its inputs, stored as an
// envelope bound to the run; Decode gives them back with the key, fails
// closed without it, and the chain and the audit header's workflow digest
// need no key. A run.created written with clear inputs (before this
// release, or before encryption) reads as written.
func TestCodec_RunCreatedInputsSealed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.db")
	db := mustOpen(t, path)
	ctx := context.Background()
	rec := func(run string) []events.Record {
		return []events.Record{{Stream: "run", Type: "run.created", Payload: created{RunID: run, Digest: "sha256:wf", Inputs: map[string]any{"q": inputCanary, "n": 3}}}}
	}
	if _, err := db.Append(ctx, "run-before", append(rec("run-before"), events.Record{Stream: "run", Type: "run.finished"}), nil); err != nil {
		t.Fatal(err)
	}
	key, b64 := newKey(t)
	t.Setenv("AGENTCTL_KEY_K1", b64)
	if err := db.EnableEncryption(ctx, "k1", key); err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"run-a", "run-b"} {
		if _, err := db.Append(ctx, run, rec(run), nil); err != nil {
			t.Fatal(err)
		}
	}
	stored := func(run string) string {
		t.Helper()
		var p string
		if err := db.SQL().Get(&p, `SELECT payload FROM events WHERE run_id = ? AND seq = 1`, run); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := stored("run-a")
	if strings.Contains(a, inputCanary) || !strings.Contains(a, `"inputs":{"v":1,"alg":"AES-256-GCM",`) || !strings.Contains(a, `"digest":"sha256:wf"`) {
		t.Fatalf("stored run.created: %s", a)
	}
	if !strings.Contains(stored("run-before"), inputCanary) {
		t.Fatal("the run recorded before encryption must stay as written")
	}

	// Read back (a fresh handle: no appended Go value to hand out).
	db2 := mustOpen(t, path)
	for _, run := range []string{"run-before", "run-a"} {
		evs, err := db2.Events(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		var p created
		if err := evs[0].Decode(&p); err != nil || p.Inputs["q"] != inputCanary || p.Inputs["n"] != float64(3) || p.RunID != run {
			t.Fatalf("%s: decoded %+v, %v", run, p, err)
		}
	}
	// The envelope of run-a's inputs moved into run-b's payload (hash
	// recomputed): it does not authenticate there.
	b := stored("run-b")
	moved := b[:strings.Index(b, `"inputs":`)] + a[strings.Index(a, `"inputs":`):]
	moved = strings.Replace(moved, `"runId":"run-a"`, `"runId":"run-b"`, 1)
	insertRaw(t, db2, "run-c", "run.created", moved)
	evs, _ := db2.Events(ctx, "run-c")
	if err := evs[0].Decode(&created{}); err == nil || !strings.Contains(err.Error(), "does not authenticate") {
		t.Fatalf("inputs sealed for another run: %v", err)
	}
	// An older binary's clear inputs in the encrypted database: as written.
	insertRaw(t, db2, "run-old", "run.created", `{"runId":"run-old","digest":"d","inputs":{"q":"clear"}}`)
	evs, _ = db2.Events(ctx, "run-old")
	var old created
	if err := evs[0].Decode(&old); err != nil || old.Inputs["q"] != "clear" {
		t.Fatalf("clear inputs: %+v, %v", old, err)
	}

	// Without the key: the inputs fail closed, the chain and the audit
	// header's digest do not need it.
	t.Setenv("AGENTCTL_KEY_K1", "")
	nokey := mustOpen(t, path)
	evs, _ = nokey.Events(ctx, "run-a")
	if err := evs[0].Decode(&created{}); !errors.Is(err, events.ErrKeyRequired) {
		t.Fatalf("decode without the key: %v, want ErrKeyRequired", err)
	}
	if _, err := nokey.VerifyRun(ctx, "run-a"); err != nil {
		t.Fatalf("verify without the key: %v", err)
	}
	var buf strings.Builder
	h, err := nokey.Export(ctx, &buf, "run-a")
	if err != nil || h.WorkflowDigest != "sha256:wf" || strings.Contains(buf.String(), inputCanary) {
		t.Fatalf("export without the key: %+v, %v\n%s", h, err, buf.String())
	}
	if _, err := nokey.Append(ctx, "run-d", rec("run-d"), nil); !errors.Is(err, events.ErrKeyRequired) {
		t.Fatalf("append run.created without the key: %v, want ErrKeyRequired", err)
	}
}

// insertRaw inserts one event as seq 1 of run with a valid chain hash.
func insertRaw(t *testing.T, db *events.DB, run, typ, payload string) {
	t.Helper()
	e := events.Event{RunID: run, Seq: 1, Stream: "run", Type: typ, Payload: payload, CreatedAt: "2026-01-01T00:00:00Z"}
	e.Hash = events.ChainHash(events.ChainLatest, e)
	if _, err := db.SQL().Exec(`INSERT INTO events (run_id, seq, stream, type, payload, created_at, prev_hash, hash) VALUES (?, 1, ?, ?, ?, ?, '', ?)`, run, e.Stream, typ, payload, e.CreatedAt, e.Hash); err != nil {
		t.Fatal(err)
	}
}
