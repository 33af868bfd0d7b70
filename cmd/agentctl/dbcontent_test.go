package main

import (
	"database/sql"
	"os"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// What a database holds, backend by backend, for the tests that run on
// both: a SQLite file is read as bytes (with its -wal and -shm), a
// PostgreSQL schema row by row as text.

// dbSnapshot is everything db holds, to compare before and after a
// command that must not write: the file's bytes on SQLite, every row of
// every table of the schema (sorted) on PostgreSQL.
func dbSnapshot(t *testing.T, db string) string {
	t.Helper()
	if !events.IsPostgres(db) {
		b, err := os.ReadFile(db)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var out strings.Builder
	pgEachTable(t, db, func(raw *sql.DB, table string) {
		var rows sql.NullString
		if err := raw.QueryRow(`SELECT string_agg(r::text, E'\n' ORDER BY r::text) FROM ` + table + ` r`).Scan(&rows); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		out.WriteString(table + "\n" + rows.String + "\n")
	})
	return out.String()
}

// dbHolds reports whether needle is stored anywhere in db: in the file,
// its -wal or -shm on SQLite, in any row of any table on PostgreSQL (as
// the row's text, where a double quote or backslash is doubled: keep them
// out of needle).
func dbHolds(t *testing.T, db, needle string) bool {
	t.Helper()
	if !events.IsPostgres(db) {
		for _, f := range []string{db, db + "-wal", db + "-shm"} {
			b, err := os.ReadFile(f)
			if err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
			if strings.Contains(string(b), needle) {
				return true
			}
		}
		return false
	}
	found := false
	pgEachTable(t, db, func(raw *sql.DB, table string) {
		var n int
		if err := raw.QueryRow(`SELECT count(*) FROM `+table+` r WHERE strpos(r::text, $1) > 0`, needle).Scan(&n); err != nil {
			t.Fatalf("%s: %v", table, err)
		}
		found = found || n > 0
	})
	return found
}

// pgEachTable calls fn for every table of the schema dsn selects.
func pgEachTable(t *testing.T, dsn string, fn func(raw *sql.DB, table string)) {
	t.Helper()
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	rows, err := raw.Query(`SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	if err := rows.Err(); err != nil || len(tables) == 0 {
		t.Fatalf("tables of %s: %v, %v", events.RedactDSN(dsn), tables, err)
	}
	for _, table := range tables {
		fn(raw, table)
	}
}

// awaitDeadOwners ends the leases the killed writers of db (a schema of
// this test's own) left behind. Liveness is the lease alone: a process
// killed with SIGKILL keeps its leases until they expire (a lease's life,
// 30 s by default), and a resume started at once is refused as busy (the
// safe side); the test moves their expiry into the past instead of
// waiting. Only killed processes hold leases when it is called. On SQLite
// it returns at once: the kernel frees the run lock with the process.
func awaitDeadOwners(t *testing.T, db string) {
	t.Helper()
	if !events.IsPostgres(db) {
		return
	}
	if _, err := openLog(t, db).SQL().Exec(`UPDATE run_leases SET lease_expires_at = now() - interval '1 second'
		WHERE owner IS NOT NULL AND lease_expires_at > now()`); err != nil {
		t.Fatalf("expire the killed writers' leases: %v", err)
	}
}

// dbArg is the value of --db in args, "" without one.
func dbArg(args []string) string {
	for i, a := range args {
		if a == "--db" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}
