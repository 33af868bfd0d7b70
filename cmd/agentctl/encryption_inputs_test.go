package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// inputsCanary is a run input: what a user typed, as private as the
// arguments built from it.
const inputsCanary = "inputs-canary-5c2e7a-typed-by-a-user"

// inputsTool answers {"match": true} when its argument q is the canary,
// and remembers how many calls carried it.
type inputsTool struct {
	mu      sync.Mutex
	matched int
}

func (it *inputsTool) def() mcptest.ToolDef {
	return mcptest.ToolDef{Name: "look", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		var a struct{ Q string }
		_ = json.Unmarshal(c.Arguments, &a)
		it.mu.Lock()
		if a.Q == inputsCanary {
			it.matched++
		}
		it.mu.Unlock()
		return &mcptest.Result{Content: mcptest.Text("looked"), StructuredContent: map[string]any{"match": a.Q == inputsCanary}}, nil
	}}
}

func (it *inputsTool) count() int {
	it.mu.Lock()
	defer it.mu.Unlock()
	return it.matched
}

// inputsWorkflow: two tasks, each calling look with the input q.
func inputsWorkflow(t *testing.T, url string) string {
	t.Helper()
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: inputs}
spec:
  inputs:
    q: {type: string}
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s: {url: %q, timeoutSeconds: 10}
  actions:
    look: {kind: mcp.call, idempotency: idempotent}
  tasks:
    - id: first
      uses: action:look
      with: {server: s, tool: look, arguments: {q: "${{ inputs.q }}"}}
    - id: second
      uses: action:look
      with: {server: s, tool: look, arguments: {q: "${{ inputs.q }}"}}
  outputs:
    match: "${{ tasks.second.output.match }}"
`, url)
	path := filepath.Join(t.TempDir(), "inputs.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// enableEncryption turns encryption on in db with a fresh key, loaded for
// the rest of the test.
func enableEncryption(t *testing.T, db string) {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
}

// TestCLI_EncryptionSealsInputs (issue 27 item 9): run.created kept the
// run's inputs in clear while the arguments built from them were sealed.
// Under `db encryption enable`, a canary input given to `run` and to
// `submit` (executed by `worker --drain`) reaches the server in every
// call, and is stored nowhere in clear (SQLite file, -wal and -shm;
// every PostgreSQL row); inspect and audit export work, and the export
// holds the inputs sealed. A run killed after its first call resumes
// with the inputs read back from the log.
func TestCLI_EncryptionSealsInputs(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		tool := &inputsTool{}
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		enableEncryption(t, db)
		wf := inputsWorkflow(t, srv.URL)

		out, stderr, code := cli(t, "run", wf, "--input", "q="+inputsCanary, "--db", db, "--output", "json")
		if code != 0 || !strings.Contains(out, `"match": true`) {
			t.Fatalf("run exit %d: %s\n%s", code, stderr, out)
		}
		ran := jsonRunID(t, out)
		out, stderr, code = cli(t, "submit", wf, "--input", "q="+inputsCanary, "--db", db)
		if code != 0 {
			t.Fatalf("submit exit %d: %s", code, stderr)
		}
		queued := strings.TrimSpace(out)
		if out, stderr, code := cli(t, "worker", "--drain", "--db", db, "--output", "json"); code != 0 || !strings.Contains(out, queued) {
			t.Fatalf("worker exit %d: %s\n%s", code, stderr, out)
		}
		if n := tool.count(); n != 4 {
			t.Fatalf("the server got the canary input in %d calls, want 4 (2 runs × 2 tasks)", n)
		}
		for _, id := range []string{ran, queued} {
			if got := describe(t, db, id); got[len(got)-1] != "run.finished succeeded" {
				t.Fatalf("run %s: %v", id, got)
			}
			if out, stderr, code := cli(t, "inspect", id, "--db", db, "--output", "json"); code != 0 || !strings.Contains(out, `"match": true`) {
				t.Fatalf("inspect %s with the key: exit %d %s\n%s", id, code, stderr, out)
			}
			file := filepath.Join(t.TempDir(), "audit.jsonl")
			if _, stderr, code := cli(t, "audit", "export", id, "-o", file, "--db", db); code != 0 {
				t.Fatalf("audit export %s: exit %d %s", id, code, stderr)
			}
			exp, _ := os.ReadFile(file)
			if strings.Contains(string(exp), inputsCanary) || !strings.Contains(string(exp), `\"inputs\":{\"v\":1,\"alg\":\"AES-256-GCM\"`) {
				t.Fatalf("audit export of %s: inputs not sealed\n%s", id, exp)
			}
			if out, stderr, code := cli(t, "audit", "verify", file); code != 0 {
				t.Fatalf("audit verify %s: exit %d %s\n%s", id, code, stderr, out)
			}
		}
		if !dbHolds(t, db, "AES-256-GCM") {
			t.Fatal("the database holds no sealed payload: nothing was checked")
		}
		if dbHolds(t, db, inputsCanary) {
			t.Errorf("the input canary is stored in clear in the database")
		}
	})
}

// TestCLI_EncryptionSealedInputsResume: a run killed after its first
// call's result resumes, its second task built from the inputs decrypted
// from run.created.
func TestCLI_EncryptionSealedInputsResume(t *testing.T) {
	tool := &inputsTool{}
	srv := mcptest.Start(t, mcptest.Options{}, tool.def())
	db := filepath.Join(t.TempDir(), "a.db")
	enableEncryption(t, db)
	wf := inputsWorkflow(t, srv.URL)
	cmd := subprocess(t, "run", wf, "--input", "q="+inputsCanary, "--db", db, "--output", "json")
	cmd.Env = append(cmd.Env, "AGENTCTL_TEST_CRASH_AFTER=call.result#1")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("the crash hook did not fire: %s", out)
	}
	awaitDeadOwners(t, db)
	ids := runIDs(t, db)
	if len(ids) != 1 || tool.count() != 1 {
		t.Fatalf("runs %v, canary calls %d; want 1 run, 1 call", ids, tool.count())
	}
	out, stderr, code := cli(t, "resume", ids[0], "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, `"match": true`) || tool.count() != 2 {
		t.Fatalf("resume exit %d, canary calls %d: %s\n%s", code, tool.count(), stderr, out)
	}
	if dbHolds(t, db, inputsCanary) {
		t.Errorf("the input canary is stored in clear in the database")
	}
}
