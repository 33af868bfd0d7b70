package events_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"database/sql"
	"encoding/json"
	"encoding/pem"
	"errors"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// Issue 13 item 6: an export that verifies must mean what jq or Python read
// in it, its header must be what its lines say, created_at is in the hash,
// and a signed export cannot be cut short.

func splitLines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }
func joinLines(ls []string) string { return strings.Join(ls, "\n") + "\n" }

// wantChainErr fails unless err is a *ChainError at seq.
func wantChainErr(t *testing.T, err error, seq int64) {
	t.Helper()
	var ce *events.ChainError
	if !errors.As(err, &ce) {
		t.Fatalf("verify err = %v, want a *ChainError at seq %d", err, seq)
	}
	if ce.Seq != seq {
		t.Fatalf("first bad seq = %d (%v), want %d", ce.Seq, err, seq)
	}
}

// (a) "payload":"<forged>", …, "PAYLOAD":"<original>": encoding/json took
// the last, case-insensitively, and verified; jq reads the forged one.
func TestAudit_DuplicateOrCaseVariantMemberRefused(t *testing.T) {
	out, _ := exportRun(t, 5)
	lines := splitLines(out)
	var l map[string]any
	if err := json.Unmarshal([]byte(lines[3]), &l); err != nil {
		t.Fatal(err)
	}
	orig, _ := json.Marshal(l["payload"])
	for name, forged := range map[string]string{
		"case variant":     strings.Replace(lines[3], `"payload":`+string(orig), `"payload":"{\"i\":666}","PAYLOAD":`+string(orig), 1),
		"exact duplicate":  strings.Replace(lines[3], `"payload":`+string(orig), `"payload":"{\"i\":666}","payload":`+string(orig), 1),
		"case-only rename": strings.Replace(lines[3], `"payload":`, `"Payload":`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			if forged == lines[3] {
				t.Fatal("the forgery did not apply")
			}
			ls := append([]string(nil), lines...)
			ls[3] = forged
			_, _, err := events.VerifyStream(strings.NewReader(joinLines(ls)))
			wantChainErr(t, err, 3)
		})
	}
	// The header is parsed as strictly.
	h := strings.Replace(lines[0], `"runId":"run-a"`, `"runId":"run-a","RUNID":"run-x"`, 1)
	_, _, err := events.VerifyStream(strings.NewReader(joinLines(append([]string{h}, lines[1:]...))))
	wantChainErr(t, err, 0)
}

// (b) Every header member is checked against the lines.
func TestAudit_HeaderMembersAreChecked(t *testing.T) {
	out, h := exportRun(t, 5)
	lines := splitLines(out)
	for name, hdr := range map[string]string{
		"workflowDigest zeros": strings.Replace(lines[0], `"workflowDigest":"sha256:abc"`, `"workflowDigest":"sha256:`+strings.Repeat("0", 64)+`"`, 1),
		"workflowDigest empty": strings.Replace(lines[0], `"workflowDigest":"sha256:abc"`, `"workflowDigest":""`, 1),
		"chain":                strings.Replace(lines[0], `"chain":"v2"`, `"chain":"v1"`, 1),
		"no chain":             strings.Replace(lines[0], `,"chain":"v2"`, ``, 1),
		"runId":                strings.Replace(lines[0], `"runId":"run-a"`, `"runId":"run-b"`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			if hdr == lines[0] {
				t.Fatal("the edit did not apply")
			}
			_, _, err := events.VerifyStream(strings.NewReader(joinLines(append([]string{hdr}, lines[1:]...))))
			var ce *events.ChainError
			if !errors.As(err, &ce) {
				t.Fatalf("edited header verified: %v", err)
			}
			if name != "runId" && ce.Seq != 0 {
				t.Fatalf("first bad seq = %d (%v), want 0 (the header)", ce.Seq, err)
			}
		})
	}
	if _, _, err := events.VerifyStream(strings.NewReader(out)); err != nil || h.Chain != "v2" {
		t.Fatalf("the untouched export: %v, chain %q", err, h.Chain)
	}
}

// (c) created_at is covered by the v2 chain.
func TestAudit_CreatedAtIsHashed(t *testing.T) {
	out, _ := exportRun(t, 5)
	lines := splitLines(out)
	re := regexp.MustCompile(`"created_at":"[^"]*"`)
	ls := append([]string(nil), lines...)
	ls[2] = re.ReplaceAllString(ls[2], `"created_at":"2001-01-01T00:00:00Z"`)
	if ls[2] == lines[2] {
		t.Fatal("the edit did not apply")
	}
	_, _, err := events.VerifyStream(strings.NewReader(joinLines(ls)))
	wantChainErr(t, err, 2)

	// And in the database (triggers dropped), VerifyRun names the seq.
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	db := mustOpen(t, path)
	appendN(t, db, "run-1", 5)
	db.Close()
	raw := rawDB(t, path)
	mustExec(t, raw, `DROP TRIGGER events_no_update`)
	mustExec(t, raw, `UPDATE events SET created_at = '2001-01-01T00:00:00Z' WHERE run_id = 'run-1' AND seq = 3`)
	raw.Close()
	_, err = mustOpen(t, path).VerifyRun(context.Background(), "run-1")
	wantChainErr(t, err, 3)
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	return raw
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func newSigningKey(t *testing.T) (ed25519.PrivateKey, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, pub
}

// signedExport exports a run of n events signed with key.
func signedExport(t *testing.T, n int, key ed25519.PrivateKey) string {
	t.Helper()
	db := mustOpen(t, filepath.Join(t.TempDir(), "a.db"))
	ctx := context.Background()
	if _, err := db.Append(ctx, "run-a", []events.Record{{Stream: "run", Type: "run.created", Payload: map[string]string{"digest": "sha256:abc"}}}, nil); err != nil {
		t.Fatal(err)
	}
	appendN(t, db, "run-a", n-1)
	var buf bytes.Buffer
	if _, err := db.ExportWith(ctx, &buf, "run-a", events.ExportOptions{SignKey: key}); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// (d) Deleting the tail (seq >= 13) and fixing the header verifies as a
// shorter run without a key (the documented limit of an unsigned export),
// and fails with the public key of a signed export.
func TestAudit_SignedExportDetectsTruncationAndHeaderEdits(t *testing.T) {
	key, pub := newSigningKey(t)
	out := signedExport(t, 20, key)
	rep, err := events.VerifyExport(strings.NewReader(out), events.VerifyOptions{PublicKey: pub})
	if err != nil || !rep.Signed || !rep.SignatureVerified || rep.Events != 20 || rep.Chain != "v2" {
		t.Fatalf("signed export: %+v, %v", rep, err)
	}
	lines := splitLines(out)

	// The tail cut and the header made consistent with what is left.
	var hdr map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &hdr); err != nil {
		t.Fatal(err)
	}
	var last map[string]any
	if err := json.Unmarshal([]byte(lines[12]), &last); err != nil { // seq 12
		t.Fatal(err)
	}
	hdr["eventCount"], hdr["finalHash"] = 12, last["hash"]
	cutHdr, _ := json.Marshal(hdr)
	cut := joinLines(append([]string{string(cutHdr)}, lines[1:13]...))
	if rep, err := events.VerifyExport(strings.NewReader(cut), events.VerifyOptions{}); err != nil || rep.Events != 12 || rep.SignatureVerified {
		t.Fatalf("without a key the cut file is consistent (documented): %+v, %v", rep, err)
	}
	_, err = events.VerifyExport(strings.NewReader(cut), events.VerifyOptions{PublicKey: pub})
	wantChainErr(t, err, 0)

	// The tail cut, the signed header kept: the count no longer matches.
	_, err = events.VerifyExport(strings.NewReader(joinLines(lines[:13])), events.VerifyOptions{PublicKey: pub})
	wantChainErr(t, err, 13)

	// The signature stripped, or another key's.
	delete(hdr, "signature")
	unsigned, _ := json.Marshal(hdr)
	_, err = events.VerifyExport(strings.NewReader(joinLines(append([]string{string(unsigned)}, lines[1:13]...))), events.VerifyOptions{PublicKey: pub})
	wantChainErr(t, err, 0)
	_, otherPub := newSigningKey(t)
	_, err = events.VerifyExport(strings.NewReader(out), events.VerifyOptions{PublicKey: otherPub})
	wantChainErr(t, err, 0)
	if !strings.Contains(err.Error(), "signed by key sha256:") {
		t.Fatalf("another key: %v, want it to name the signing key", err)
	}
}

// Runs written before created_at was hashed verify as written; a run
// resumed after the upgrade goes on in v2; the version never goes down.
func TestChain_VersionedV1RunsStillVerify(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	db := mustOpen(t, path)
	db.Close()
	raw := rawDB(t, path)
	prev := ""
	for seq := int64(1); seq <= 3; seq++ {
		typ, payload := "test.step", `{"i":1}`
		if seq == 1 {
			typ, payload = "run.created", `{"digest":"sha256:old"}`
		}
		h := events.ComputeHash(prev, "run-old", seq, "run", typ, payload) // as the old binary wrote it
		mustExec(t, raw, `INSERT INTO events (run_id, seq, stream, type, payload, created_at, prev_hash, hash) VALUES (?, ?, 'run', ?, ?, '2025-01-01T00:00:00Z', ?, ?)`, "run-old", seq, typ, payload, prev, h)
		prev = h
	}
	raw.Close()
	db = mustOpen(t, path)
	ctx := context.Background()
	if n, err := db.VerifyRun(ctx, "run-old"); err != nil || n != 3 {
		t.Fatalf("v1 run: %d, %v", n, err)
	}
	var buf bytes.Buffer
	h, err := db.Export(ctx, &buf, "run-old")
	if err != nil || h.Chain != "v1" {
		t.Fatalf("export of a v1 run: %+v, %v", h, err)
	}
	// The same file as the old exporter wrote it (format v1, no chain).
	lines := splitLines(buf.String())
	v1 := strings.Replace(strings.Replace(lines[0], events.AuditFormat, events.AuditFormatV1, 1), `,"chain":"v1"`, "", 1)
	if rep, err := events.VerifyExport(strings.NewReader(joinLines(append([]string{v1}, lines[1:]...))), events.VerifyOptions{}); err != nil || rep.Chain != "v1" || rep.Events != 3 {
		t.Fatalf("a v1 export: %+v, %v", rep, err)
	}

	appendN(t, db, "run-old", 2) // resumed by this binary
	buf.Reset()
	h, err = db.Export(ctx, &buf, "run-old")
	if err != nil || h.Chain != "v1 (seq 1-3), v2 (seq 4-5)" {
		t.Fatalf("export of a run resumed across the upgrade: %+v, %v", h, err)
	}
	rep, err := events.VerifyExport(&buf, events.VerifyOptions{})
	if err != nil || rep.Chain != h.Chain || len(rep.Spans) != 2 || rep.Spans[1] != (events.ChainSpan{Version: 2, FromSeq: 4, ToSeq: 5}) {
		t.Fatalf("verify: %+v, %v", rep, err)
	}

	// A v1 hash after a v2 one: a downgrade, refused.
	evs, err := db.Events(ctx, "run-old")
	if err != nil {
		t.Fatal(err)
	}
	e := evs[4]
	e.Hash = events.ComputeHash(e.PrevHash, e.RunID, e.Seq, e.Stream, e.Type, e.Payload)
	wantChainErr(t, events.Verify(append(evs[:4:4], e)), 5)
}

// The key files are the PEM forms openssl writes.
func TestAudit_KeyFiles(t *testing.T) {
	key, pub := newSigningKey(t)
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pder, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := events.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	if err != nil || !k2.Equal(key) {
		t.Fatalf("private key: %v", err)
	}
	p2, err := events.ParsePublicKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}))
	if err != nil || !p2.Equal(pub) {
		t.Fatalf("public key: %v", err)
	}
	if _, err := events.ParseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder})); err == nil {
		t.Fatal("a public key taken as a signing key")
	}
}

// RequireIntact is what resume and replay call before acting: a storage
// error (exit 5) that names the first bad seq.
func TestRequireIntact(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	db := mustOpen(t, path)
	appendN(t, db, "run-1", 5)
	ctx := context.Background()
	if err := db.RequireIntact(ctx, "run-1"); err != nil {
		t.Fatalf("intact run: %v", err)
	}
	if err := db.RequireIntact(ctx, "run-none"); !errors.Is(err, events.ErrNoRun) {
		t.Fatalf("unknown run: %v, want ErrNoRun", err)
	}
	db.Close()
	raw := rawDB(t, path)
	mustExec(t, raw, `DROP TRIGGER events_no_update`)
	mustExec(t, raw, `UPDATE events SET payload = '{"i":9}' WHERE run_id = 'run-1' AND seq = 2`)
	raw.Close()
	err := mustOpen(t, path).RequireIntact(ctx, "run-1")
	var se *events.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "at seq 2") {
		t.Fatalf("tampered run: %v, want an *events.Error naming seq 2", err)
	}
	wantChainErr(t, err, 2)
}

// The projector never updates an effects row (reconciliations are written
// once): an UPDATE is refused by a trigger; a rebuild's DELETE is not.
func TestEffectsRowsAreWrittenOnce(t *testing.T) {
	db := mustOpen(t, filepath.Join(t.TempDir(), "a.db"))
	x := db.SQL()
	if _, err := x.Exec(`INSERT INTO effects (effect_id, run_id, status, reason, reconciled_at) VALUES ('e1', 'run-1', 'applied', 'operator', 'now')`); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Exec(`UPDATE effects SET status = 'not-applied' WHERE effect_id = 'e1'`); err == nil || !strings.Contains(err.Error(), "UPDATE refused") {
		t.Fatalf("UPDATE effects: %v, want refused", err)
	}
	if _, err := x.Exec(`DELETE FROM effects WHERE run_id = 'run-1'`); err != nil {
		t.Fatalf("a rebuild's DELETE: %v", err)
	}
}
