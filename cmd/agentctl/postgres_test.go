package main

import (
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/migrations"
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
	runID := jsonRunID(t, out)
	if out := run(0, "inspect", runID, "--verify"); !strings.Contains(out, "chain     verified (v2)") || !strings.Contains(out, "projection matches the log") {
		t.Fatalf("inspect --verify:\n%s", out)
	}
	if out := run(0, "runs", "list"); !strings.Contains(out, runID[len(runID)-8:]) || !strings.Contains(out, "succeeded") { // its short form
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

// TestCLI_PostgresSchemaVersionRefused: a PostgreSQL database migrated by
// a newer agentctl (a version above this binary's) is refused by run,
// worker, inspect and db migrate with exit 5 and "upgrade agentctl"; one
// at an older version than this binary's (not 0) by run, worker and
// inspect with exit 5 and the command to run. Neither is written to.
func TestCLI_PostgresSchemaVersionRefused(t *testing.T) {
	_, srvURL := demotest.StartTest(t, demoserver.Options{})
	wf := writeWorkflow(t, srvURL)
	// A plain connection: events.Open would refuse these schemas too.
	raw := func(t *testing.T, dsn string) *sql.DB {
		t.Helper()
		db, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	count := func(t *testing.T, db *sql.DB, query string) int {
		t.Helper()
		var n int
		if err := db.QueryRow(query).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, c := range []struct {
		name, alter, want, version string
		cmds                       [][]string
	}{
		{"newer", fmt.Sprintf(`INSERT INTO agentctl_schema (version, name) VALUES (%d, 'future.sql')`, migrations.LatestPostgres+1),
			"upgrade agentctl", fmt.Sprintf("version %d", migrations.LatestPostgres+1),
			[][]string{{"run", wf}, {"worker", "--drain"}, {"inspect", "last"}, {"db", "migrate"}}},
		{"older", `DELETE FROM agentctl_schema WHERE version > 1`,
			"agentctl db migrate", "version 1",
			[][]string{{"run", wf}, {"worker", "--drain"}, {"inspect", "last"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := testkit.PostgresDB(t)
			db := raw(t, dsn)
			if _, err := db.Exec(c.alter); err != nil {
				t.Fatal(err)
			}
			versions := count(t, db, `SELECT count(*) FROM agentctl_schema`)
			for _, args := range c.cmds {
				_, stderr, code := cli(t, append(args, "--db", dsn)...)
				if code != 5 || !strings.Contains(stderr, c.want) || !strings.Contains(stderr, c.version) {
					t.Fatalf("%v on a %s schema: exit %d, want 5 naming %q and %q\n%s", args, c.name, code, c.version, c.want, stderr)
				}
			}
			if n := count(t, db, `SELECT count(*) FROM events`); n != 0 {
				t.Fatalf("%d events written to a refused database", n)
			}
			if n := count(t, db, `SELECT count(*) FROM agentctl_schema`); n != versions {
				t.Fatalf("agentctl_schema went from %d rows to %d", versions, n)
			}
		})
	}
}

// TestCLI_PostgresPasswordOutsideTheURL: a URL without a password works
// with the password in PGPASSWORD or in a pgpass file (pgx's rules); a
// wrong password in the URL is a storage error (exit 5) that does not show
// it; and no row of any table holds the URL with its password.
func TestCLI_PostgresPasswordOutsideTheURL(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	pw, ok := u.User.Password()
	if !ok {
		t.Skip("AGENTCTL_TEST_POSTGRES has no password in its URL")
	}
	_, srvURL := demotest.StartTest(t, demoserver.Options{})
	wf := writeWorkflow(t, srvURL)
	bare := *u
	bare.User = url.User(u.User.Username())
	wrong := *u
	wrong.User = url.UserPassword(u.User.Username(), "wrong-pw-5ec12e7")
	t.Setenv("PGPASSWORD", "")
	t.Setenv("PGPASSFILE", filepath.Join(t.TempDir(), "none"))
	if _, stderr, code := cli(t, "runs", "list", "--db", wrong.String()); code != 5 || strings.Contains(stderr, "wrong-pw-5ec12e7") || !strings.Contains(stderr, "xxxxx") {
		t.Fatalf("wrong password: exit %d, want 5 with the password masked\n%s", code, stderr)
	}
	if _, _, code := cli(t, "runs", "list", "--db", bare.String()); code == 0 {
		t.Skip("the test server does not ask for a password")
	}
	t.Setenv("PGPASSWORD", pw)
	out, stderr, code := cli(t, "run", wf, "--db", bare.String(), "--output", "json")
	if code != 0 {
		t.Fatalf("run with PGPASSWORD: exit %d\n%s", code, stderr)
	}
	runID := jsonRunID(t, out)
	t.Setenv("PGPASSWORD", "")
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "5432"
	}
	pass := filepath.Join(t.TempDir(), "pgpass")
	line := fmt.Sprintf("%s:%s:%s:%s:%s\n", host, port, strings.TrimPrefix(u.Path, "/"), u.User.Username(), pw)
	if err := os.WriteFile(pass, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PGPASSFILE", pass)
	if out, stderr, code := cli(t, "inspect", runID, "--verify", "--db", bare.String()); code != 0 || !strings.Contains(out, "chain     verified") {
		t.Fatalf("inspect with a pgpass file: exit %d\n%s%s", code, out, stderr)
	}
	if dbHolds(t, dsn, ":"+pw+"@") {
		t.Fatal("a row of the database holds the URL with its password")
	}
}

// TestCLI_PostgresErrorIsExit5WithSQLSTATE: an error PostgreSQL raises
// that is neither a conflict nor a retryable abort (here a trigger's
// division by zero, SQLSTATE 22012, on the first projection write) ends
// the command with exit 5, a storage error whose message names the
// SQLSTATE; the refused append left nothing behind.
func TestCLI_PostgresErrorIsExit5WithSQLSTATE(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM 1/0; RETURN NEW; END $$;
		CREATE TRIGGER refuse BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
		t.Fatal(err)
	}
	_, srvURL := demotest.StartTest(t, demoserver.Options{})
	for _, args := range [][]string{{"run", writeWorkflow(t, srvURL)}, {"submit", writeWorkflow(t, srvURL)}} {
		_, stderr, code := cli(t, append(args, "--db", dsn, "--output", "json")...)
		if code != 5 || !strings.Contains(stderr, "SQLSTATE 22012") || !strings.Contains(stderr, `"storage"`) {
			t.Fatalf("%s: exit %d, want 5 naming SQLSTATE 22012 as a storage error\n%s", args[0], code, stderr)
		}
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM events`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("events = %d, %v; want none", n, err)
	}
}
