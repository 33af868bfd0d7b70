package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_EncryptionSealsErrors (issue 13 item 8): the events of a failed
// call were sealed, but the server's error text (a JSON-RPC error message,
// an isError content) sat in clear in the projection columns runs.error,
// tasks.error and protocol_calls.error. After an encrypted run that fails,
// the database (a SQLite file with its -wal and -shm, or any row of a
// PostgreSQL schema) holds no canary; inspect with the key
// still shows the server's text.
func TestCLI_EncryptionSealsErrors(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, mode := range []string{"rpc", "iserror"} {
			t.Run(mode, func(t *testing.T) { testEncryptionSealsErrors(t, b.DSN(t), mode) })
		}
	})
}

func testEncryptionSealsErrors(t *testing.T, db, mode string) {
	d := actTool()
	d.Handler = func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		if mode == "rpc" {
			return nil, &mcptest.RPCError{Code: -32000, Message: "boom " + resultCanary}
		}
		return &mcptest.Result{IsError: true, Content: mcptest.Text("bad " + resultCanary)}, nil
	}
	srv := mcptest.Start(t, mcptest.Options{}, d)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db); code != 4 || !strings.Contains(stderr, resultCanary) {
		t.Fatalf("run: exit %d, want 4 with the server's text on stderr: %s", code, stderr)
	}
	if dbHolds(t, db, resultCanary) {
		t.Errorf("the server's error text is stored in clear in the database")
	}
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	runID := ids[0]
	out, stderr, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
	if code != 0 || strings.Count(out, resultCanary) < 3 || strings.Contains(out, projector.SealedText) {
		t.Fatalf("inspect with the key: exit %d, want the server's text in run, task and call errors, no marker: %s\n%s", code, stderr, out)
	}
	if out, stderr, code := cli(t, "inspect", runID, "--db", db, "--verify"); code != 0 {
		t.Fatalf("inspect --verify: exit %d: %s\n%s", code, stderr, out)
	}
}
