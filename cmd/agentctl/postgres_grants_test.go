package main

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
)

// leastPrivilegeSQL is the first ```sql block under "## Least privilege"
// in docs/POSTGRES.md: the test runs the documented grants themselves, so
// the document cannot drift from what works.
func leastPrivilegeSQL(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/POSTGRES.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	i := strings.Index(s, "## Least privilege")
	if i < 0 {
		t.Fatal(`docs/POSTGRES.md: no "## Least privilege" section`)
	}
	m := regexp.MustCompile("(?s)```sql\n(.*?)```").FindStringSubmatch(s[i:])
	if m == nil {
		t.Fatal("docs/POSTGRES.md: no sql block in the Least privilege section")
	}
	var stmts []string
	for _, line := range strings.Split(m[1], "\n") {
		if j := strings.Index(line, "--"); j >= 0 {
			line = line[:j]
		}
		if line = strings.TrimSpace(line); line != "" {
			stmts = append(stmts, strings.TrimSuffix(line, ";"))
		}
	}
	return stmts
}

// TestCLI_PostgresLeastPrivilege: a role given exactly the grants
// docs/POSTGRES.md documents can run, submit, drain with a worker and
// inspect --verify, and cannot change the log or the leases by any
// statement: UPDATE, DELETE and TRUNCATE of events, disabling the
// append-only triggers and deleting lease rows all fail for want of a
// privilege, whatever the triggers would have said.
func TestCLI_PostgresLeastPrivilege(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	owner, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = owner.Close() })
	var canCreate bool
	var database, schema string
	if err := owner.QueryRow(`SELECT rolcreaterole, current_database(), current_schema() FROM pg_roles WHERE rolname = current_user`).Scan(&canCreate, &database, &schema); err != nil {
		t.Fatal(err)
	}
	if !canCreate {
		if os.Getenv("CI") != "" {
			t.Fatal("the test role cannot create roles under CI: .ci/postgres grants it CREATEROLE")
		}
		t.Skip("the test role cannot create roles (ALTER ROLE … CREATEROLE to run this test)")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	role, password := "agentctl_w_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])+"pw"
	for _, stmt := range leastPrivilegeSQL(t) {
		stmt = strings.ReplaceAll(stmt, "agentctl_worker", role)
		stmt = strings.ReplaceAll(stmt, "PASSWORD '...'", "PASSWORD '"+password+"'")
		stmt = strings.ReplaceAll(stmt, "DATABASE agentctl ", "DATABASE "+database+" ")
		stmt = strings.ReplaceAll(stmt, "SCHEMA public ", "SCHEMA "+schema+" ")
		if _, err := owner.Exec(stmt); err != nil {
			t.Fatalf("documented grant %q: %v", stmt, err)
		}
		if strings.HasPrefix(stmt, "CREATE ROLE") {
			t.Cleanup(func() {
				for _, q := range []string{
					`REVOKE ALL ON ALL TABLES IN SCHEMA ` + schema + ` FROM ` + role,
					`REVOKE ALL ON SCHEMA ` + schema + ` FROM ` + role,
					`REVOKE ALL ON DATABASE ` + database + ` FROM ` + role,
					`DROP ROLE ` + role,
				} {
					if _, err := owner.Exec(q); err != nil {
						t.Errorf("cleanup %s: %v", q, err)
					}
				}
			})
		}
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	worker := u.String()

	_, srvURL := demotest.StartTest(t, demoserver.Options{})
	wf := writeWorkflow(t, srvURL)
	run := func(want int, args ...string) string {
		t.Helper()
		out, stderr, code := cli(t, append(args, "--db", worker)...)
		if code != want {
			t.Fatalf("%v as the least-privilege role: exit %d, want %d\n%s%s", args, code, want, out, stderr)
		}
		return out
	}
	runID := jsonRunID(t, run(0, "run", wf, "--input", "query=grants", "--output", "json"))
	// The role may not delete the finished run's lease row: its release
	// falls back to clearing it, so nobody holds the run.
	var released bool
	if err := owner.QueryRow(`SELECT owner IS NULL AND lease_expires_at IS NULL FROM run_leases WHERE run_id = $1`, runID).Scan(&released); err != nil || !released {
		t.Fatalf("lease row of %s after its run as the least-privilege role: released=%v, %v; want kept and released", runID, released, err)
	}
	run(0, "submit", wf, "--input", "query=queued")
	if out := run(0, "worker", "--drain", "--output", "json"); !regexp.MustCompile(`"state":\s*"succeeded"`).MatchString(out) {
		t.Fatalf("worker --drain as the least-privilege role:\n%s", out)
	}
	if out := run(0, "inspect", runID, "--verify"); !strings.Contains(out, "projection matches the log") {
		t.Fatalf("inspect --verify as the least-privilege role:\n%s", out)
	}

	w, err := sql.Open("pgx", worker)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	for _, stmt := range []string{
		`UPDATE events SET type = 'x' WHERE run_id = '` + runID + `'`,
		`DELETE FROM events WHERE run_id = '` + runID + `'`,
		`TRUNCATE events`,
		`ALTER TABLE events DISABLE TRIGGER events_no_update`,
		`DELETE FROM run_leases`,
	} {
		_, err := w.Exec(stmt)
		if err == nil {
			t.Errorf("%s as the least-privilege role: succeeded, want refused by a missing privilege", stmt)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "permission denied") && !strings.Contains(msg, "must be owner") {
			t.Errorf("%s as the least-privilege role: %v, want permission denied / must be owner", stmt, err)
		}
	}
	if out := run(0, "inspect", runID, "--verify"); !strings.Contains(out, "chain     verified (v2)") {
		t.Fatalf("inspect --verify after the refused statements:\n%s", out)
	}
}
