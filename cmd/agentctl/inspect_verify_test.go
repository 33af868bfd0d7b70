package main

import (
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

type inspectVerified struct {
	OK   bool `json:"ok"`
	Data struct {
		ChainVerified      *bool             `json:"chainVerified"`
		ChainVersion       string            `json:"chainVersion"`
		ChainError         string            `json:"chainError"`
		ProjectionVerified *bool             `json:"projectionVerified"`
		ProjectionMismatch []json.RawMessage `json:"projectionMismatch"`
		Run                struct {
			State string `json:"state"`
		} `json:"run"`
	} `json:"data"`
}

func inspectJSON(t *testing.T, args ...string) (inspectVerified, string, int) {
	t.Helper()
	out, stderr, code := cli(t, append([]string{"inspect", "--output", "json"}, args...)...)
	var v inspectVerified
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("inspect stdout is not one JSON envelope (%v): exit %d %s\n%s", err, code, stderr, out)
	}
	return v, stderr, code
}

// TestCLI_InspectVerifies (issue 13 item 7, issue 33 item 5): inspect
// shows chainVerified (always under 100k events, in human output as in
// json; else on request with --verify); one changed payload byte
// (triggers dropped) is reported with its seq and exit 5; an edited
// projection row (no trigger guards runs) is found by --verify
// recomputing the rows from the log.
func TestCLI_InspectVerifies(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, chattyTool())
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)

	v, stderr, code := inspectJSON(t, runID, "--db", db)
	if code != 0 || !v.OK || v.Data.ChainVerified == nil || !*v.Data.ChainVerified || v.Data.ChainVersion != "v2" || v.Data.ProjectionVerified != nil {
		t.Fatalf("inspect --output json: exit %d %s %+v", code, stderr, v.Data)
	}
	v, stderr, code = inspectJSON(t, runID, "--db", db, "--verify")
	if code != 0 || v.Data.ProjectionVerified == nil || !*v.Data.ProjectionVerified {
		t.Fatalf("inspect --verify: exit %d %s %+v", code, stderr, v.Data)
	}
	human, _, code := cli(t, "inspect", runID, "--db", db)
	// Human output verifies the chain by default too (issue 33); --verify adds the projection.
	if code != 0 || !strings.Contains(human, "chain     verified (v2)") || strings.Contains(human, "projection") {
		t.Fatalf("human inspect: exit %d\n%s", code, human)
	}
	human, _, code = cli(t, "inspect", runID, "--db", db, "--verify")
	if code != 0 || !strings.Contains(human, "chain     verified (v2)") || !strings.Contains(human, "projection matches the log") {
		t.Fatalf("human inspect --verify: exit %d\n%s", code, human)
	}

	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// A projection row edited: the chain is intact, the rows are not.
	if _, err := raw.Exec(`UPDATE runs SET state = 'failed', error = 'forged' WHERE run_id = ?`, runID); err != nil {
		t.Fatal(err)
	}
	v, stderr, code = inspectJSON(t, runID, "--db", db, "--verify")
	if code != 5 || v.OK || v.Data.ProjectionVerified == nil || *v.Data.ProjectionVerified || len(v.Data.ProjectionMismatch) != 1 ||
		!strings.Contains(strings.ReplaceAll(string(v.Data.ProjectionMismatch[0]), " ", ""), `"table":"runs"`) || !strings.Contains(stderr, "projection differs from the log: runs") {
		t.Fatalf("edited runs row: exit %d %s %+v", code, stderr, v.Data)
	}
	human, stderr, code = cli(t, "inspect", runID, "--db", db, "--verify")
	if code != 5 || !strings.Contains(human, "projection DIFFERS from the log: runs: row 1: column error, state differs from the log") {
		t.Fatalf("human, edited runs row: exit %d %s\n%s", code, stderr, human)
	}
	if _, _, code = cli(t, "db", "rebuild-projections", runID, "--db", db); code != 0 {
		t.Fatalf("rebuild exit %d", code)
	}
	if v, _, code = inspectJSON(t, runID, "--db", db, "--verify"); code != 0 || v.Data.Run.State != "succeeded" {
		t.Fatalf("after rebuild: exit %d %+v", code, v.Data)
	}

	// One payload byte changed in the log.
	if _, err := raw.Exec(`DROP TRIGGER events_no_update`); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE events SET payload = replace(payload, 'idempotent', 'idempotenT') WHERE run_id = ? AND seq = (SELECT MIN(seq) FROM events WHERE run_id = ? AND payload LIKE '%idempotent%')`, runID, runID); err != nil {
		t.Fatal(err)
	}
	var seq int
	if err := raw.QueryRow(`SELECT seq FROM events WHERE run_id = ? AND payload LIKE '%idempotenT%'`, runID).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	v, stderr, code = inspectJSON(t, runID, "--db", db)
	want := "seq " + itoa(seq) + ":"
	if code != 5 || v.OK || v.Data.ChainVerified == nil || *v.Data.ChainVerified || !strings.HasPrefix(v.Data.ChainError, want) || !strings.Contains(stderr, "at seq "+itoa(seq)) {
		t.Fatalf("tampered payload: exit %d %s %+v (want %q)", code, stderr, v.Data, want)
	}
	if human, _, code = cli(t, "inspect", runID, "--db", db, "--verify"); code != 5 || !strings.Contains(human, "chain     BROKEN at "+want) {
		t.Fatalf("human, tampered payload: exit %d\n%s", code, human)
	}
	if human, _, code = cli(t, "inspect", runID, "--db", db); code != 5 || !strings.Contains(human, "chain     BROKEN at "+want) {
		t.Fatalf("human without --verify, tampered payload: exit %d\n%s", code, human)
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestCLI_InspectVerifyFindsDeletedTail (issue 13 item 6d in the database):
// deleting a run's last events leaves a chain that verifies as a shorter
// run; --verify finds that the projection (the run's state) says
// more than the log holds.
func TestCLI_InspectVerifyFindsDeletedTail(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, chattyTool())
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	raw, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	for _, q := range []string{`DROP TRIGGER events_no_delete`, `DELETE FROM events WHERE run_id = ? AND seq >= (SELECT MAX(seq) - 2 FROM events WHERE run_id = ?)`} {
		args := []any{}
		if strings.Contains(q, "?") {
			args = []any{runID, runID}
		}
		if _, err := raw.Exec(q, args...); err != nil {
			t.Fatal(err)
		}
	}
	v, stderr, code := inspectJSON(t, runID, "--db", db, "--verify")
	if code != 5 || v.Data.ChainVerified == nil || !*v.Data.ChainVerified || v.Data.ProjectionVerified == nil || *v.Data.ProjectionVerified ||
		!strings.Contains(stderr, "projection differs from the log: runs") {
		t.Fatalf("deleted tail: exit %d %s %+v", code, stderr, v.Data)
	}
}
