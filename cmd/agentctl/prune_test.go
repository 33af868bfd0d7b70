package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/transport/mcptest"
)

type pruneResult struct {
	DryRun bool `json:"dryRun"`
	Pruned []struct {
		RunID  string `json:"runId"`
		Events int64  `json:"events"`
	} `json:"pruned"`
	Kept []struct {
		RunID  string `json:"runId"`
		Reason string `json:"reason"`
	} `json:"kept"`
}

func prune(t *testing.T, db string, flags ...string) pruneResult {
	t.Helper()
	out, stderr, code := cli(t, append([]string{"runs", "prune", "--db", db, "--output", "json"}, flags...)...)
	if code != 0 {
		t.Fatalf("runs prune %v: exit %d %s", flags, code, stderr)
	}
	var env struct {
		Kind string      `json:"kind"`
		Data pruneResult `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || env.Kind != "PruneResult" {
		t.Fatalf("runs prune %v: %v\n%s", flags, err, out)
	}
	return env.Data
}

func (p pruneResult) ids() string {
	var ids []string
	for _, r := range p.Pruned {
		ids = append(ids, r.RunID)
	}
	return strings.Join(ids, ",")
}

// rowsOf counts the rows of runID in the log and in every projection.
func rowsOf(t *testing.T, db, runID string) map[string]int {
	t.Helper()
	x, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	n := map[string]int{}
	for _, table := range []string{"events", "runs", "tasks", "protocol_sessions", "protocol_calls", "effects"} {
		var c int
		if err := x.QueryRow(`SELECT COUNT(*) FROM `+table+` WHERE run_id = ?`, runID).Scan(&c); err != nil {
			t.Fatal(err)
		}
		n[table] = c
	}
	return n
}

// TestCLI_RunsPrune: prune removes whole finished runs (events and
// projection rows) and nothing else; the dry run changes nothing and says
// why a run is kept; a replay that stays keeps its source; a running run
// is never pruned; a plain DELETE of events is still refused afterwards.
func TestCLI_RunsPrune(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	wf := writeWorkflow(t, url)
	run := func() string {
		t.Helper()
		if _, stderr, code := cli(t, "run", wf, "--input", "query=prune", "--db", db); code != 0 {
			t.Fatalf("run: %s", stderr)
		}
		return listRunIDs(t, db, "--limit", "1")[0]
	}
	r1, r2 := run(), run()
	if _, stderr, code := cli(t, "replay", r1, "--db", db); code != 0 {
		t.Fatalf("replay: %s", stderr)
	}
	rp := listRunIDs(t, db, "--limit", "1")[0]
	r3 := run()
	before := map[string]map[string]int{}
	for _, id := range []string{r1, r2, rp, r3} {
		before[id] = rowsOf(t, db, id)
	}

	if _, stderr, code := cli(t, "runs", "prune", "--db", db); code != 2 || !strings.Contains(stderr, "--keep") {
		t.Fatalf("prune without a selection: exit %d %s", code, stderr)
	}
	// Newest first: r3, rp, r2, r1. Keeping two keeps the replay, which
	// keeps its source r1: only r2 goes.
	dry := prune(t, db, "--keep", "2", "--dry-run")
	if !dry.DryRun || dry.ids() != r2 || len(dry.Kept) != 1 || dry.Kept[0].RunID != r1 || !strings.Contains(dry.Kept[0].Reason, rp) {
		t.Fatalf("dry run = %+v, want %s pruned and %s kept for %s", dry, r2, r1, rp)
	}
	for id, want := range before {
		if got := rowsOf(t, db, id); !equalCounts(got, want) {
			t.Fatalf("the dry run changed %s: %v, was %v", id, got, want)
		}
	}
	out, _, code := cli(t, "runs", "prune", "--keep", "2", "--db", db)
	if code != 0 || !strings.Contains(out, "pruning 1 run(s)") || !strings.Contains(out, r2) || !strings.Contains(out, "kept "+r1+": its frames are referenced by replay "+rp) {
		t.Fatalf("prune --keep 2: exit %d\n%s", code, out)
	}
	for table, n := range rowsOf(t, db, r2) {
		if n != 0 {
			t.Errorf("%d %s rows of the pruned run left", n, table)
		}
	}
	for _, id := range []string{r1, rp, r3} {
		if got := rowsOf(t, db, id); !equalCounts(got, before[id]) {
			t.Errorf("prune changed %s: %v, was %v", id, got, before[id])
		}
	}
	if _, stderr, code := cli(t, "inspect", r2, "--db", db); code != 2 {
		t.Fatalf("inspect of the pruned run: exit %d %s", code, stderr)
	}
	if _, stderr, code := cli(t, "inspect", rp, "--db", db); code != 0 {
		t.Fatalf("inspect of the kept replay: exit %d %s", code, stderr)
	}
	exp := filepath.Join(t.TempDir(), "r1.audit.jsonl")
	if _, stderr, code := cli(t, "audit", "export", r1, "-o", exp, "--db", db); code != 0 {
		t.Fatalf("export: %s", stderr)
	}
	if _, stderr, code := cli(t, "audit", "verify", exp); code != 0 {
		t.Fatalf("verify of a kept run after a prune: %s", stderr)
	}

	// A run in progress, its call held by the server.
	called, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tool := actTool()
	act := tool.Handler
	tool.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		once.Do(func() { close(called) })
		<-release
		return act(ctx, c)
	}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	proc := subprocess(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db)
	var procOut bytes.Buffer
	proc.Stdout, proc.Stderr = &procOut, &procOut
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	<-called
	live := listRunIDs(t, db, "--state", "running")
	if len(live) != 1 {
		t.Fatalf("running runs: %v", live)
	}
	// Everything before an hour from now: the replay goes, so its source
	// goes with it; the running run stays.
	all := prune(t, db, "--before", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	close(release)
	if err := proc.Wait(); err != nil {
		t.Fatalf("the running run: %v\n%s", err, procOut.String())
	}
	if got := all.ids(); got != strings.Join([]string{r3, rp, r1}, ",") {
		t.Fatalf("pruned %s, want %s,%s,%s", got, r3, rp, r1)
	}
	if len(all.Kept) != 1 || all.Kept[0].RunID != live[0] || !strings.Contains(all.Kept[0].Reason, "not finished") {
		t.Fatalf("kept = %+v, want the running run", all.Kept)
	}
	if got := listRunIDs(t, db); len(got) != 1 || got[0] != live[0] {
		t.Fatalf("runs after pruning all but the running one: %v", got)
	}
	if n := rowsOf(t, db, live[0]); n["events"] == 0 || n["runs"] != 1 {
		t.Fatalf("the running run lost rows: %v", n)
	}
	// The log is append-only again for everyone else.
	x, err := sql.Open("sqlite3", db)
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if _, err := x.Exec(`DELETE FROM events WHERE run_id = ?`, live[0]); err == nil || !strings.Contains(err.Error(), "append-only") {
		t.Fatalf("plain DELETE after prune: %v", err)
	}
}

func equalCounts(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestCLI_RunsPruneKeepZero: --keep 0 is a selection, not a missing flag:
// it keeps none, so every finished run the other flags select goes (here
// all those in --state succeeded, then all the rest); --keep -1 is refused.
func TestCLI_RunsPruneKeepZero(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	wf := writeWorkflow(t, url)
	for range 3 {
		if _, stderr, code := cli(t, "run", wf, "--input", "query=prune", "--db", db); code != 0 {
			t.Fatalf("run: %s", stderr)
		}
	}
	all := listRunIDs(t, db)
	if len(all) != 3 {
		t.Fatalf("runs: %v", all)
	}
	if _, stderr, code := cli(t, "runs", "prune", "--keep", "-1", "--db", db); code != 2 || !strings.Contains(stderr, "--keep -1") {
		t.Fatalf("prune --keep -1: exit %d %s", code, stderr)
	}
	dry := prune(t, db, "--keep", "0", "--state", "succeeded", "--dry-run")
	if len(dry.Pruned) != 3 || len(dry.Kept) != 0 {
		t.Fatalf("dry run of --keep 0 = %+v, want all 3 runs pruned", dry)
	}
	if got := listRunIDs(t, db); len(got) != 3 {
		t.Fatalf("the dry run pruned: %v", got)
	}
	if res := prune(t, db, "--keep", "0"); len(res.Pruned) != 3 {
		t.Fatalf("prune --keep 0 = %+v, want all 3 runs pruned", res)
	}
	if got := listRunIDs(t, db); len(got) != 0 {
		t.Fatalf("runs left after prune --keep 0: %v", got)
	}
	for _, id := range all {
		if n := rowsOf(t, db, id)["events"]; n != 0 {
			t.Fatalf("%d events of %s left", n, id)
		}
	}
}
