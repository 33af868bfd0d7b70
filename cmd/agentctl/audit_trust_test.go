package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// resultCanary is remote data: a tool's output, not a secret. With
// encryption on it must not be stored in clear anywhere.
const resultCanary = "result-canary-7f3a91-sealed-only"

func canaryResultTool() mcptest.ToolDef {
	d := actTool()
	d.Handler = func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return &mcptest.Result{Content: mcptest.Text(resultCanary), StructuredContent: map[string]any{"done": true, "note": resultCanary}}, nil
	}
	return d
}

// TestCLI_EncryptionSealsResults (issue 13 item 8): call.result was sealed
// but the same output sat in clear in task.finished and run.finished. After
// an encrypted run, the database, its -wal and its -shm hold no canary,
// and the key still reads it back. On SQLite and PostgreSQL (no row of
// any table holds it).
func TestCLI_EncryptionSealsResults(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testEncryptionSealsResults(t, b.DSN(t)) })
}

func testEncryptionSealsResults(t *testing.T, db string) {
	srv := mcptest.Start(t, mcptest.Options{}, canaryResultTool())
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, resultCanary) {
		t.Fatalf("run exit %d (outputs must carry the canary): %s\n%s", code, stderr, out)
	}
	runID := jsonRunID(t, out)
	if !dbHolds(t, db, "AES-256-GCM") {
		t.Fatal("the database holds no sealed payload: nothing was checked")
	}
	if dbHolds(t, db, resultCanary) {
		t.Errorf("the result canary is stored in clear in the database")
	}
	if out, stderr, code := cli(t, "inspect", runID, "--db", db, "--output", "json"); code != 0 || !strings.Contains(out, resultCanary) {
		t.Fatalf("inspect with the key: exit %d %s\n%s", code, stderr, out)
	}
	var sealed int
	raw := openLog(t, db)
	if err := raw.SQL().Get(&sealed, `SELECT COUNT(*) FROM events WHERE run_id = ? AND type IN ('task.finished', 'run.finished') AND payload LIKE '{"v":1,"alg":"AES-256-GCM",%'`, runID); err != nil || sealed != 2 {
		t.Fatalf("sealed task.finished + run.finished = %d, %v; want 2", sealed, err)
	}
}

func writeKeyPair(t *testing.T, dir string) (keyPath, pubPath string) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	pder, _ := x509.MarshalPKIXPublicKey(pub)
	keyPath, pubPath = filepath.Join(dir, "audit.key"), filepath.Join(dir, "audit.pub")
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return keyPath, pubPath
}

// TestCLI_AuditSignedExport (issue 13 item 6): a signed export verifies
// with the public key and says so; cut short with its header made
// consistent, it verifies only without the key, and the output says what
// that proves; with the key it fails (exit 4), saying the signature is
// missing (not "chain broken at seq 0").
func TestCLI_AuditSignedExport(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, chattyTool())
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	keyPath, pubPath := writeKeyPair(t, dir)
	file := filepath.Join(dir, "run.audit.jsonl")
	if _, stderr, code = cli(t, "audit", "export", runID, "--db", db, "-o", file, "--sign-key", "file:"+keyPath); code != 0 || !strings.Contains(stderr, "signed by sha256:") {
		t.Fatalf("signed export exit %d: %s", code, stderr)
	}
	out, stderr, code = cli(t, "audit", "verify", file, "--public-key", pubPath, "--output", "json")
	if d := envelopeData(t, out); code != 0 || d["signature"] != "verified" || d["chain"] != "v2" {
		t.Fatalf("verify with the key: exit %d %s\n%s", code, stderr, out)
	}
	if out, _, code = cli(t, "audit", "verify", file); code != 0 || !strings.Contains(out, "NOT checked") {
		t.Fatalf("verify without the key: exit %d\n%s", code, out)
	}

	raw, _ := os.ReadFile(file)
	lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
	keep := len(lines) - 4 // header + events; drop the last three events
	var hdr, last map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &hdr)
	_ = json.Unmarshal([]byte(lines[keep-1]), &last)
	hdr["eventCount"], hdr["finalHash"] = last["seq"], last["hash"]
	delete(hdr, "signature")
	h, _ := json.Marshal(hdr)
	cut := filepath.Join(dir, "cut.jsonl")
	_ = os.WriteFile(cut, []byte(string(h)+"\n"+strings.Join(lines[1:keep], "\n")+"\n"), 0o600)
	if out, _, code = cli(t, "audit", "verify", cut); code != 0 || !strings.Contains(out, "signature: none") {
		t.Fatalf("an unsigned cut file is consistent (the documented limit): exit %d\n%s", code, out)
	}
	if _, stderr, code = cli(t, "audit", "verify", cut, "--public-key", pubPath); code != 4 || strings.Contains(stderr, "chain broken") || strings.Contains(stderr, "seq 0") ||
		!strings.Contains(stderr, "audit header of run "+runID+": signature: missing: the header is not signed") {
		t.Fatalf("the cut file with the key: exit %d %s", code, stderr)
	}

	// A signed header edited: the signature is wrong, and the error says so.
	var signed map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &signed)
	signed["workflowDigest"] = "sha256:" + strings.Repeat("0", 64)
	sh, _ := json.Marshal(signed)
	edited := filepath.Join(dir, "edited.jsonl")
	_ = os.WriteFile(edited, []byte(string(sh)+"\n"+strings.Join(lines[1:], "\n")+"\n"), 0o600)
	if _, stderr, code = cli(t, "audit", "verify", edited, "--public-key", pubPath); code != 4 || !strings.Contains(stderr, "audit header of run "+runID+": signature: wrong: it does not verify with the public key") {
		t.Fatalf("an edited signed header with the key: exit %d %s", code, stderr)
	}

	// Flag syntax: a reference, never a bare path; errors never quote a key.
	if _, stderr, code = cli(t, "audit", "export", runID, "--db", db, "--sign-key", keyPath); code != 2 || !strings.Contains(stderr, "file:PATH or env:VAR") {
		t.Fatalf("bare --sign-key path: exit %d %s", code, stderr)
	}
	t.Setenv("AUDIT_KEY", "not a pem key")
	if _, stderr, code = cli(t, "audit", "export", runID, "--db", db, "--sign-key", "env:AUDIT_KEY"); code != 2 || strings.Contains(stderr, "not a pem key") {
		t.Fatalf("bad key in env: exit %d %s", code, stderr)
	}
	kb, _ := os.ReadFile(keyPath)
	t.Setenv("AUDIT_KEY", string(kb))
	if out, stderr, code = cli(t, "audit", "export", runID, "--db", db, "--sign-key", "env:AUDIT_KEY"); code != 0 || !strings.Contains(out, `"signature":{"alg":"Ed25519"`) {
		t.Fatalf("--sign-key env: exit %d %s", code, stderr)
	}
	if out, _, _ = cli(t, "audit", "--help"); !strings.Contains(out, "NOT prove who wrote the file") {
		t.Fatalf("audit --help does not say what an unsigned export proves:\n%s", out)
	}
}
