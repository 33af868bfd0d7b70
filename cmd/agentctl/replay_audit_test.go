package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

const canary = "canary-5ec12e7-do-not-persist"

func canaryWorkflow(t *testing.T, url string) string {
	t.Helper()
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: canary}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [CANARY_TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local:
      url: %q
      headers:
        authorization: {env: CANARY_TOKEN}
  actions:
    act: {kind: mcp.call, idempotency: pure}
  tasks:
    - id: headers
      uses: action:act
      with: {server: local, tool: headers}
`, url)
	path := filepath.Join(t.TempDir(), "canary.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func envelopeData(t *testing.T, out string) map[string]any {
	t.Helper()
	var env struct {
		OK   bool           `json:"ok"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || !env.OK {
		t.Fatalf("not an ok envelope (%v): %s", err, out)
	}
	return env.Data
}

// TestCLI_ReplayAuditRunsEncryption: runs list, replay without the secret
// or the server, audit export/verify/tamper, no secret stored anywhere,
// then encryption enabled under a live log. On SQLite and PostgreSQL.
func TestCLI_ReplayAuditRunsEncryption(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testReplayAuditRunsEncryption(t, b.DSN(t)) })
}

func testReplayAuditRunsEncryption(t *testing.T, db string) {
	srv := mcptest.NewServer(mcptest.Options{}, mcptest.EchoHeaders("headers"))
	dir := t.TempDir()
	t.Setenv("CANARY_TOKEN", "Bearer "+canary)
	out, stderr, code := cli(t, "run", canaryWorkflow(t, srv.URL), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	srv.Close()

	// runs list
	out, stderr, code = cli(t, "runs", "list", "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, `"runId": "`+runID+`"`) || !strings.Contains(out, `"calls": 1`) || !strings.Contains(out, `"state": "succeeded"`) {
		t.Fatalf("runs list exit %d: %s %s", code, out, stderr)
	}

	// replay without the secret and with the server gone
	t.Setenv("CANARY_TOKEN", "")
	out, stderr, code = cli(t, "replay", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	replayID := jsonRunID(t, out)
	if !strings.HasPrefix(replayID, "replay-") {
		t.Fatalf("replay id %q", replayID)
	}
	if _, stderr, code = cli(t, "replay", "run-nope", "--db", db); code != 2 || !strings.Contains(stderr, "run-nope") {
		t.Fatalf("replay unknown run: exit %d %s", code, stderr)
	}

	// audit export -o FILE, verify, tamper; no secret anywhere
	file := filepath.Join(dir, "run.audit.jsonl")
	if _, stderr, code = cli(t, "audit", "export", runID, "--db", db, "-o", file); code != 0 {
		t.Fatalf("audit export exit %d: %s", code, stderr)
	}
	out, stderr, code = cli(t, "audit", "verify", file, "--output", "json")
	if code != 0 || envelopeData(t, out)["events"] == nil {
		t.Fatalf("audit verify exit %d: %s %s", code, out, stderr)
	}
	raw, _ := os.ReadFile(file)
	lines := strings.Split(string(raw), "\n")
	lines[3] = strings.Replace(lines[3], `"seq":3`, `"seq":4`, 1)
	bad := filepath.Join(dir, "bad.jsonl")
	_ = os.WriteFile(bad, []byte(strings.Join(lines, "\n")), 0o600)
	if _, stderr, code = cli(t, "audit", "verify", bad); code != 4 || !strings.Contains(stderr, "at seq 3") {
		t.Fatalf("tampered verify: exit %d %s", code, stderr)
	}
	inspect, _, _ := cli(t, "inspect", runID, "--db", db, "--output", "json")
	for name, b := range map[string]string{"audit export": string(raw), "inspect": inspect} {
		if strings.Contains(b, canary) {
			t.Errorf("the secret canary appears in the %s", name)
		}
	}
	if dbHolds(t, db, canary) {
		t.Errorf("the secret canary is stored in the database")
	}

	// encryption: enable, record (a replay writes protocol events), read with and without the key
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code = cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	out, stderr, code = cli(t, "replay", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("replay into encrypted db exit %d: %s", code, stderr)
	}
	encID := jsonRunID(t, out)
	if _, stderr, code = cli(t, "inspect", encID, "--db", db); code != 0 {
		t.Fatalf("inspect with key exit %d: %s", code, stderr)
	}
	if _, stderr, code = cli(t, "db", "rebuild-projections", "--db", db); code != 0 {
		t.Fatalf("rebuild exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", "")
	// The replay's own protocol events are sealed; reading them needs the key.
	if _, stderr, code = cli(t, "db", "rebuild-projections", "--db", db); code != 5 || !strings.Contains(stderr, "AGENTCTL_KEY_K1") {
		t.Fatalf("rebuild without key: exit %d %s", code, stderr)
	}
	// Its frames are references to the source run, recorded before
	// encryption was enabled: inspect shows them without the key.
	if out, stderr, code := cli(t, "inspect", encID, "--db", db, "--output", "json"); code != 0 || !strings.Contains(out, `"sourceRunId": "`+runID+`"`) {
		t.Fatalf("inspect without key: exit %d %s\n%s", code, stderr, out)
	}
	encFile := filepath.Join(dir, "enc.jsonl")
	if _, stderr, code = cli(t, "audit", "export", encID, "--db", db, "-o", encFile); code != 0 {
		t.Fatalf("export without key exit %d: %s", code, stderr)
	}
	if _, stderr, code = cli(t, "audit", "verify", encFile); code != 0 {
		t.Fatalf("verify without key exit %d: %s", code, stderr)
	}
}

// TestCLI_ReplayOfEncryptedRun: a replay references frames that are sealed
// in its source run; it replays, and its inspect shows them, with the key,
// and without the key inspect fails closed (exit 5) instead of showing less.
// On SQLite and PostgreSQL.
func TestCLI_ReplayOfEncryptedRun(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testReplayOfEncryptedRun(t, b.DSN(t)) })
}

func testReplayOfEncryptedRun(t *testing.T, db string) {
	srv := mcptest.Start(t, mcptest.Options{}, chattyTool())
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	srv.Close()
	out, stderr, code = cli(t, "replay", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("replay exit %d: %s", code, stderr)
	}
	replayID := jsonRunID(t, out)
	src, _, _ := cli(t, "inspect", runID, "--db", db, "--output", "json")
	rep, stderr, code := cli(t, "inspect", replayID, "--db", db, "--output", "json")
	if code != 0 || strings.Count(rep, `"notifications/progress"`) != strings.Count(src, `"notifications/progress"`) || strings.Count(src, `"notifications/progress"`) == 0 {
		t.Fatalf("inspect of the replay with the key: exit %d %s\n%s", code, stderr, rep)
	}
	if _, stderr, code = cli(t, "replay", replayID, "--db", db, "--output", "json"); code != 0 {
		t.Fatalf("replay of the replay exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", "")
	if _, stderr, code = cli(t, "inspect", replayID, "--db", db); code != 5 || !strings.Contains(stderr, "AGENTCTL_KEY_K1") {
		t.Fatalf("inspect of the replay without the key: exit %d %s", code, stderr)
	}
}
