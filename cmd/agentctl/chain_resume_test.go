package main

import (
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// tamper runs an UPDATE on the events of runID with the append-only
// trigger dropped (an attacker with the file) and returns the lowest seq
// it changed.
func tamper(t *testing.T, path, runID, set, where string) int64 {
	t.Helper()
	raw, err := sql.Open("sqlite3", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`DROP TRIGGER IF EXISTS events_no_update`); err != nil {
		t.Fatal(err)
	}
	var seq int64
	if err := raw.QueryRow(`SELECT MIN(seq) FROM events WHERE run_id = ? AND `+where, runID).Scan(&seq); err != nil {
		t.Fatalf("tamper: no event matches %s: %v", where, err)
	}
	res, err := raw.Exec(`UPDATE events SET payload = `+set+` WHERE run_id = ? AND `+where, runID)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		t.Fatalf("tamper: nothing changed")
	}
	return seq
}

// killMidCall runs wf in a subprocess and SIGKILLs it while the server
// holds its call (blockingAct), and returns the run id.
func killMidCall(t *testing.T, db, wf string, entered chan struct{}) string {
	t.Helper()
	cmd := subprocess(t, "run", wf, "--db", db)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatal("the call never reached the server")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	return ids[0]
}

// TestCLI_ResumeAndReplayVerifyTheChain: a run whose log no longer
// recomputes is not acted on. resume of a crashed run with one payload
// byte changed exits 5 naming the seq and sends nothing; replay of a
// tampered run, or of a replay whose referenced frames were tampered,
// exits 5.
func TestCLI_ResumeAndReplayVerifyTheChain(t *testing.T) {
	entered := make(chan struct{})
	var calls atomic.Int32
	srv := mcptest.Start(t, mcptest.Options{}, blockingAct(entered, &calls))
	db := t.TempDir() + "/a.db"
	runID := killMidCall(t, db, actWorkflow(t, srv.URL, "idempotent"), entered)
	before := srv.Stats().Calls["act"]
	seq := tamper(t, db, runID, `replace(payload, '"act"', '"acT"')`, `type = 'call.prepared'`)
	_, stderr, code := cli(t, "resume", runID, "--db", db)
	if code != 5 || !strings.Contains(stderr, fmt.Sprintf("at seq %d", seq)) {
		t.Fatalf("resume of a tampered run: exit %d, want 5 naming seq %d; stderr:\n%s", code, seq, stderr)
	}
	if after := srv.Stats().Calls["act"]; after != before {
		t.Fatalf("resume of a tampered run sent tools/call: %d → %d", before, after)
	}

	// replay: the source run, then a replay whose frames are another run's.
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "pure"), "--db", db, "--output", "json") // the tool answers now
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, stderr)
	}
	src := jsonRunID(t, out)
	out, stderr, code = cli(t, "replay", src, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("replay: exit %d %s", code, stderr)
	}
	rep := jsonRunID(t, out)
	seq = tamper(t, db, src, `replace(payload, 'done', 'DONE')`, `type LIKE 'mcp.%' AND payload LIKE '%done%'`)
	for _, id := range []string{src, rep} {
		_, stderr, code = cli(t, "replay", id, "--db", db)
		if code != 5 || !strings.Contains(stderr, fmt.Sprintf("chain broken in run %s at seq %d", src, seq)) {
			t.Fatalf("replay %s after %s was tampered at seq %d: exit %d, stderr:\n%s", id, src, seq, code, stderr)
		}
	}
}

// TestCLI_ResumeRefusesARewrittenClass: a run killed mid-call of an
// at_most_once action, its class rewritten to idempotent in run.created and
// call.prepared (which would buy a redispatch), is refused by resume
// (chain broken, exit 5): the server saw one call and still has one.
func TestCLI_ResumeRefusesARewrittenClass(t *testing.T) {
	entered := make(chan struct{})
	var calls atomic.Int32
	srv := mcptest.Start(t, mcptest.Options{}, blockingAct(entered, &calls))
	db := t.TempDir() + "/a.db"
	runID := killMidCall(t, db, actWorkflow(t, srv.URL, "at_most_once"), entered)
	if n := srv.Stats().Calls["act"]; n != 1 {
		t.Fatalf("server saw %d calls before resume, want 1", n)
	}
	seq := tamper(t, db, runID, `replace(payload, 'at_most_once', 'idempotent')`, `type IN ('run.created', 'call.prepared') AND payload LIKE '%at_most_once%'`)
	_, stderr, code := cli(t, "resume", runID, "--db", db)
	if code != 5 || !strings.Contains(stderr, fmt.Sprintf("at seq %d", seq)) {
		t.Fatalf("resume of a rewritten class: exit %d, want 5 naming seq %d; stderr:\n%s", code, seq, stderr)
	}
	if n := srv.Stats().Calls["act"]; n != 1 {
		t.Fatalf("server saw %d calls after resume, want 1", n)
	}
}

// TestCLI_AuditExportBrokenChain: audit export of a stored run whose
// chain no longer recomputes exits 5 (storage, like resume, replay and
// inspect --verify), names the first bad seq, and leaves no file; an
// intact run still exports.
func TestCLI_AuditExportBrokenChain(t *testing.T) {
	db, _ := seededDB(t)
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	seq := tamper(t, db, ids[0], `replace(payload, '"lookup', '"lookuP')`, `type = 'run.created'`)
	out := t.TempDir() + "/run.audit.jsonl"
	for _, args := range [][]string{{"-o", out}, {"--output", "json"}} {
		stdout, stderr, code := cli(t, append([]string{"audit", "export", ids[0], "--db", db}, args...)...)
		if code != 5 || !strings.Contains(stderr, fmt.Sprintf("seq %d", seq)) || stdout != "" {
			t.Fatalf("audit export %v of a broken chain: exit %d, want 5 naming seq %d\nstdout:\n%s\nstderr:\n%s", args, code, seq, stdout, stderr)
		}
		if args[0] == "--output" && !strings.Contains(stderr, `"class":"storage"`) {
			t.Fatalf("error class: %s", stderr)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("audit export of a broken chain left %s: %v", out, err)
	}
}
