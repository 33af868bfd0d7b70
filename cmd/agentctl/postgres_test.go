package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestCLI_PostgresRunInspectAudit: on a PostgreSQL URL, run, inspect
// --verify, runs list, audit export and audit verify work as on a file;
// the URL's password never appears in any output; nothing is written
// next to the working directory (no "-runlock" file for a URL).
func TestCLI_PostgresRunInspectAudit(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, hasPW := u.User.Password()
	_, srvURL := demotest.StartTest(t, demoserver.Options{})
	wf := writeWorkflow(t, srvURL)
	cwd, _ := os.Getwd()
	var all strings.Builder
	run := func(want int, args ...string) string {
		t.Helper()
		out, stderr, code := cli(t, append(args, "--db", dsn)...)
		all.WriteString(out + stderr)
		if code != want {
			t.Fatalf("%v: exit %d, want %d\n%s%s", args, code, want, out, stderr)
		}
		return out
	}
	out := run(0, "run", wf, "--input", "query=postgres", "--output", "json")
	runID := envelopeData(t, out)["runId"].(string)
	if out := run(0, "inspect", runID, "--verify"); !strings.Contains(out, "chain     verified (v2)") || !strings.Contains(out, "projection matches the log") {
		t.Fatalf("inspect --verify:\n%s", out)
	}
	if out := run(0, "runs", "list"); !strings.Contains(out, runID) || !strings.Contains(out, "succeeded") {
		t.Fatalf("runs list:\n%s", out)
	}
	file := filepath.Join(t.TempDir(), "run.audit.jsonl")
	run(0, "audit", "export", runID, "-o", file)
	if out, stderr, code := cli(t, "audit", "verify", file); code != 0 || !strings.Contains(out, "ok: ") {
		t.Fatalf("audit verify: exit %d\n%s%s", code, out, stderr)
	}
	run(2, "inspect", "run-unknown")
	if out := run(0, "db", "migrate"); !strings.Contains(out, "up to date") || !strings.Contains(out, "xxxxx") {
		t.Fatalf("db migrate:\n%s", out)
	}
	if hasPW && strings.Contains(all.String(), ":"+pw+"@") {
		t.Fatalf("the URL's password appears in the output:\n%s", all.String())
	}
	if m, _ := filepath.Glob(filepath.Join(cwd, "*runlock*")); len(m) > 0 {
		t.Fatalf("a URL made files in the working directory: %v", m)
	}
}

// TestCLI_PostgresSchemaNotMigrated: a database agentctl never migrated
// is refused by run and inspect with exit 5 and the command to run; db
// migrate then brings it to the current schema.
func TestCLI_PostgresSchemaNotMigrated(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	u, _ := url.Parse(dsn)
	q := u.Query()
	q.Set("search_path", q.Get("search_path")+"_empty")
	u.RawQuery = q.Encode()
	empty := u.String()
	admin := testkit.OpenDB(t, dsn, events.Options{})
	if _, err := admin.SQL().Exec(`CREATE SCHEMA ` + q.Get("search_path")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.SQL().Exec(`DROP SCHEMA ` + q.Get("search_path") + ` CASCADE`) })
	_, url := demotest.StartTest(t, demoserver.Options{})
	for _, args := range [][]string{{"run", writeWorkflow(t, url)}, {"inspect", "run-x"}, {"worker", "--drain"}} {
		_, stderr, code := cli(t, append(args, "--db", empty)...)
		if code != 5 || !strings.Contains(stderr, "agentctl db migrate") || !strings.Contains(stderr, "version 0") {
			t.Fatalf("%v on an unmigrated database: exit %d\n%s", args, code, stderr)
		}
	}
	if out, stderr, code := cli(t, "db", "migrate", "--db", empty); code != 0 || !strings.Contains(out, "migrated from version 0 to") {
		t.Fatalf("db migrate: exit %d\n%s%s", code, out, stderr)
	}
	if _, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", empty); code != 0 {
		t.Fatalf("run after migrate: exit %d\n%s", code, stderr)
	}
}
