package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/migrations"
)

// oldDBViewNames are the files a run's views are kept in, beside its
// database: what inspect printed at the base commit.
var oldDBViewNames = []string{"human.txt", "json.json", "paths.txt"}

// pathBlock is one call's state machine path in the HTML report.
var pathBlock = regexp.MustCompile(`(?s)<ol class="path">.*?</ol>`)

// oldDBViews is what inspect shows of runID: the human summary, the JSON
// document (its data, without projectionVerified, which only --verify
// sets) and each call's state machine path of the HTML report, one block
// a line.
func oldDBViews(t *testing.T, db, runID string) map[string]string {
	t.Helper()
	human, stderr, code := cli(t, "inspect", runID, "--db", db, "--color", "never")
	if code != 0 {
		t.Fatalf("inspect %s: exit %d: %s", runID, code, stderr)
	}
	out, stderr, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect %s --output json: exit %d: %s", runID, code, stderr)
	}
	var env struct{ Data map[string]json.RawMessage }
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("inspect %s --output json: %v\n%s", runID, err, out)
	}
	delete(env.Data, "projectionVerified")
	js, err := json.MarshalIndent(env.Data, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	html, stderr, code := cli(t, "inspect", runID, "--db", db, "--html", "-o", "-")
	if code != 0 {
		t.Fatalf("inspect %s --html: exit %d: %s", runID, code, stderr)
	}
	paths := strings.Join(pathBlock.FindAllString(html, -1), "\n")
	return map[string]string{"human.txt": human, "json.json": string(js) + "\n", "paths.txt": paths + "\n"}
}

// saveOldDBViews writes oldDBViews of runID under dir/run.
func saveOldDBViews(t *testing.T, db, dir, run, runID string) {
	t.Helper()
	d := filepath.Join(dir, run)
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, v := range oldDBViews(t, db, runID) {
		if err := os.WriteFile(filepath.Join(d, name), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// schemaVersion is the SQLite file's PRAGMA user_version.
func schemaVersion(t *testing.T, db string) int {
	t.Helper()
	raw, err := sql.Open("sqlite3", "file:"+db+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	v, err := migrations.Version(context.Background(), raw)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// viewDiff says how view got (named name) fails to show what want, the
// view recorded by the base release, showed; "" when it does. A later
// release may add to a view, never change or drop what it showed: the
// JSON document must hold every recorded member with its value, the
// human summary every recorded line in order; the state machine paths
// are compared whole.
func viewDiff(name, got, want string) string {
	switch name {
	case "json.json":
		var g, w any
		if err := json.Unmarshal([]byte(got), &g); err != nil {
			return err.Error()
		}
		if err := json.Unmarshal([]byte(want), &w); err != nil {
			return err.Error()
		}
		return jsonSubset("data", g, oneRowPerSession(w))
	case "human.txt":
		lines := strings.Split(got, "\n")
		for _, l := range strings.Split(want, "\n") {
			i := slices.Index(lines, l)
			if i < 0 {
				return fmt.Sprintf("line %q missing or out of order", l)
			}
			lines = lines[i+1:]
		}
		return ""
	}
	if got != want {
		return "not equal"
	}
	return ""
}

// oneRowPerSession drops from a recorded inspect document the
// protocolSessions rows that copied a session's row to another task that
// used it: since migration 0018 (PostgreSQL 0007) the table holds one row
// per session, the first, the opener's.
func oneRowPerSession(doc any) any {
	data, _ := doc.(map[string]any)
	rows, ok := data["protocolSessions"].([]any)
	if !ok {
		return doc
	}
	seen := map[string]bool{}
	kept := []any{}
	for _, r := range rows {
		m, _ := r.(map[string]any)
		key := fmt.Sprint(m["remote"], "\x00", m["generation"])
		if !seen[key] {
			seen[key] = true
			kept = append(kept, r)
		}
	}
	data["protocolSessions"] = kept
	return doc
}

// jsonSubset says where got does not hold want (at path): every member of
// an object, every element of an array (same length), every scalar equal.
func jsonSubset(path string, got, want any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path + ": not an object"
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return path + "." + k + ": missing"
			}
			if d := jsonSubset(path+"."+k, gv, wv); d != "" {
				return d
			}
		}
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path + ": not an array of " + strconv.Itoa(len(w))
		}
		for i := range w {
			if d := jsonSubset(path+"["+strconv.Itoa(i)+"]", g[i], w[i]); d != "" {
				return d
			}
		}
	default:
		if !reflect.DeepEqual(got, want) {
			return fmt.Sprintf("%s: %v, recorded %v", path, got, want)
		}
	}
	return ""
}

// TestCLI_OldDatabase opens the databases the release before the typed log
// wrote (testdata/olddb: schema 15, chain v2, call.transition and
// session.attached events; one with sealed payloads) and, through the CLI,
// checks that every run is still first-class after the upgrade: inspect
// shows what it showed then, inspect --verify, audit export and audit
// verify pass, a replay ends as the run did, and the unfinished run
// resumes to its end without sending its at_most_once call again.
func TestCLI_OldDatabase(t *testing.T) {
	for _, name := range []string{"plain", "sealed"} {
		t.Run(name, func(t *testing.T) { oldDatabase(t, name) })
	}
}

func oldDatabase(t *testing.T, name string) {
	src := filepath.Join("testdata", "olddb")
	var m oldDBManifest
	b, err := os.ReadFile(filepath.Join(src, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(filepath.Join(src, name+".db"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, name+".db")
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if v := schemaVersion(t, db); v != 15 {
		t.Fatalf("%s.db is at schema %d, want 15 (the release before the typed log)", name, v)
	}
	if name == "sealed" {
		t.Setenv("AGENTCTL_KEY_K1", oldDBKey)
	}
	t.Setenv("PATH", peerOnPath(t))
	calls := filepath.Join(dir, "calls")
	t.Setenv(oldDBCallsVar, calls)

	// What inspect shows of each run is what it showed when recorded.
	for _, r := range m.Runs {
		got := oldDBViews(t, db, r.RunID)
		for _, v := range oldDBViewNames {
			want, err := os.ReadFile(filepath.Join(src, name, r.Name, v))
			if err != nil {
				t.Fatal(err)
			}
			if d := viewDiff(v, got[v], string(want)); d != "" {
				t.Errorf("%s: inspect %s differs from the recorded view: %s\ngot:\n%s\nwant:\n%s", r.Name, v, d, got[v], want)
			}
		}
	}
	if v := schemaVersion(t, db); v != migrations.Latest {
		t.Fatalf("after inspect the database is at schema %d, want %d", v, migrations.Latest)
	}
	check := func(r oldDBRun) {
		t.Helper()
		if _, stderr, code := cli(t, "inspect", r.RunID, "--db", db, "--verify"); code != 0 {
			t.Errorf("%s: inspect --verify: exit %d: %s", r.Name, code, stderr)
		}
		exp := filepath.Join(dir, r.Name+".audit.jsonl")
		if _, stderr, code := cli(t, "audit", "export", r.RunID, "--db", db, "-o", exp); code != 0 {
			t.Errorf("%s: audit export: exit %d: %s", r.Name, code, stderr)
		} else if _, stderr, code := cli(t, "audit", "verify", exp); code != 0 {
			t.Errorf("%s: audit verify: exit %d: %s", r.Name, code, stderr)
		}
		if r.ReplayOf != "" {
			return
		}
		out, stderr, code := cli(t, "replay", r.RunID, "--db", db, "--output", "json")
		if code != r.Exit {
			t.Errorf("%s: replay: exit %d, want %d: %s", r.Name, code, r.Exit, stderr)
		} else if id, err := decodeRunID(out); err != nil {
			t.Errorf("%s: replay: %v", r.Name, err)
		} else if _, stderr, code := cli(t, "inspect", id, "--db", db, "--verify"); code != 0 {
			t.Errorf("%s: inspect --verify of its replay: exit %d: %s", r.Name, code, stderr)
		}
	}
	for _, r := range m.Runs {
		if r.Unfinished {
			// Before its resume: verify and export only.
			check(oldDBRun{Name: r.Name + "-interrupted", RunID: r.RunID, ReplayOf: "-"})
			continue
		}
		check(r)
	}
	for _, r := range m.Runs {
		if !r.Unfinished {
			continue
		}
		_, stderr, code := cli(t, "resume", r.RunID, "--db", db, "--output", "json")
		if code != r.Exit {
			t.Fatalf("%s: resume: exit %d, want %d: %s", r.Name, code, r.Exit, stderr)
		}
		// Server-side: the resume ran get once, and never sent the
		// at_most_once search again.
		b, _ := os.ReadFile(calls)
		var tools []string
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if f := strings.Fields(line); len(f) > 0 {
				tools = append(tools, f[0])
			}
		}
		if strings.Join(tools, ",") != "get" {
			t.Fatalf("%s: the stdio server ran %v on resume, want [get]", r.Name, tools)
		}
		out, _, code := cli(t, "inspect", r.RunID, "--db", db, "--output", "json")
		var doc struct {
			Data struct {
				Run     struct{ State string }
				Outputs map[string]any
			}
		}
		if err := json.Unmarshal([]byte(out), &doc); code != 0 || err != nil || doc.Data.Run.State != "succeeded" || doc.Data.Outputs["title"] == nil {
			t.Fatalf("%s after resume: exit %d, %v: %s", r.Name, code, err, out)
		}
		check(r)
	}
}
