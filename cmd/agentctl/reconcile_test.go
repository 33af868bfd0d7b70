package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// uncertainRun runs an unknown-class call into a server restart: the run
// ends uncertain (exit 3) with one call on the server.
func uncertainRun(t *testing.T) (srv *mcptest.Server, db, runID, effectID string) {
	t.Helper()
	srv = mcptest.Start(t, mcptest.Options{}, actTool())
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
	db = filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "unknown"), "--db", db, "--output", "json")
	if code != 3 {
		t.Fatalf("run exit %d, want 3: %s", code, stderr)
	}
	runID = jsonRunID(t, out)
	effects := listEffects(t, db, runID)
	if len(effects) != 1 || effects[0]["status"] != "uncertain" {
		t.Fatalf("effects = %v", effects)
	}
	effectID = effects[0]["effectId"].(string)
	if !strings.Contains(stderr, "agentctl effects reconcile "+effectID) || !strings.Contains(stderr, "agentctl resume "+runID) {
		t.Fatalf("stderr does not say how to reconcile:\n%s", stderr)
	}
	return srv, db, runID, effectID
}

func listEffects(t *testing.T, db, runID string) []map[string]any {
	t.Helper()
	out, stderr, code := cli(t, "effects", "list", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("effects list exit %d: %s", code, stderr)
	}
	var env struct {
		Kind string `json:"kind"`
		Data struct {
			Effects []map[string]any `json:"effects"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || env.Kind != "EffectList" {
		t.Fatalf("effects list: %v %s", err, out)
	}
	return env.Data.Effects
}

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCLI_ReconcileApplied: the operator says the call ran and gives its
// result; resume finishes the run with that result and sends nothing.
func TestCLI_ReconcileApplied(t *testing.T) {
	srv, db, runID, id := uncertainRun(t)
	// Refusals record nothing: resume before reconcile, a result that
	// violates the outputSchema, a missing result, no reason.
	if _, stderr, code := cli(t, "resume", runID, "--db", db); code != 2 || !strings.Contains(stderr, "reconcile it first") {
		t.Fatalf("resume before reconcile: exit %d %s", code, stderr)
	}
	for _, args := range [][]string{
		{"--status", "applied", "--reason", "seen", "--result-file", writeFile(t, `{"done":"yes"}`)},
		{"--status", "applied", "--reason", "seen"},
		{"--status", "applied", "--result-file", writeFile(t, `{"done":true}`)},
		{"--status", "maybe", "--reason", "seen"},
	} {
		if _, stderr, code := cli(t, append([]string{"effects", "reconcile", id, "--db", db}, args...)...); code != 2 {
			t.Fatalf("reconcile %v: exit %d, want 2: %s", args, code, stderr)
		}
	}
	out, stderr, code := cli(t, "effects", "reconcile", id, "--db", db, "--status", "applied", "--reason", "order 17 exists",
		"--result-file", writeFile(t, `{"done": true}`))
	if code != 0 || !strings.Contains(out, "agentctl resume "+runID) {
		t.Fatalf("reconcile exit %d: %s %s", code, out, stderr)
	}
	if _, stderr, code := cli(t, "effects", "reconcile", id, "--db", db, "--status", "not-applied", "--reason", "again"); code != 2 || !strings.Contains(stderr, "not uncertain") {
		t.Fatalf("second reconcile: exit %d %s", code, stderr)
	}
	code, data, stderr := resumeJSON(t, db, runID)
	if code != 0 {
		t.Fatalf("resume exit %d: %s", code, stderr)
	}
	if r, _ := json.Marshal(data["outputs"]); string(r) != `{"result":{"done":true}}` {
		t.Fatalf("outputs = %s", r)
	}
	if st := srv.Stats(); st.Calls["act"] != 1 || st.Initialize != 1 {
		t.Fatalf("server saw %d calls, %d initializations; want 1, 1", st.Calls["act"], st.Initialize)
	}
	e := listEffects(t, db, runID)
	if len(e) != 1 || e[0]["status"] != "succeeded" || e[0]["reconciled"] != "applied" {
		t.Fatalf("effects = %v", e)
	}
	got := describe(t, db, runID)
	tail := strings.Join(got[len(got)-5:], "\n")
	want := strings.Join([]string{"run.finished uncertain", "call.reconciled uncertain->succeeded", "run.resumed",
		"task.finished only succeeded", "run.finished succeeded"}, "\n")
	if tail != want {
		t.Fatalf("log ends:\n%s\nwant:\n%s", tail, want)
	}
	if _, stderr, code := cli(t, "resume", runID, "--db", db); code != 2 || !strings.Contains(stderr, "finished succeeded") {
		t.Fatalf("resume of a succeeded run: exit %d %s", code, stderr)
	}
	assertRebuildEqual(t, db, runID)
}

// TestCLI_ReconcileNotApplied: the operator says the call did not run;
// resume starts task attempt 2 with a new call identity (and key).
func TestCLI_ReconcileNotApplied(t *testing.T) {
	srv, db, runID, id := uncertainRun(t)
	if _, stderr, code := cli(t, "effects", "reconcile", id, "--db", db, "--status", "not-applied", "--reason", "no order in the shop"); code != 0 {
		t.Fatalf("reconcile: %s", stderr)
	}
	code, data, stderr := resumeJSON(t, db, runID)
	if code != 0 {
		t.Fatalf("resume exit %d: %s", code, stderr)
	}
	if r, _ := json.Marshal(data["outputs"]); string(r) != `{"result":{"done":true}}` {
		t.Fatalf("outputs = %s", r)
	}
	if st := srv.Stats(); st.Calls["act"] != 2 || st.Initialize != 2 {
		t.Fatalf("server saw %d calls, %d initializations; want 2, 2", st.Calls["act"], st.Initialize)
	}
	e := listEffects(t, db, runID)
	if len(e) != 2 {
		t.Fatalf("effects = %v", e)
	}
	byAttempt := map[float64]map[string]any{}
	for _, r := range e {
		byAttempt[r["attempt"].(float64)] = r
	}
	if byAttempt[1]["effectId"] != id || byAttempt[1]["status"] != "failed" || byAttempt[1]["reconciled"] != "not-applied" ||
		byAttempt[2]["status"] != "succeeded" || byAttempt[2]["effectId"] == id {
		t.Fatalf("effects = %v", e)
	}
	assertRebuildEqual(t, db, runID)
}
