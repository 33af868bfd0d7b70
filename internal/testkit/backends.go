package testkit

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver for the admin connection

	"github.com/agentctl/agentctl/events"
)

// PostgresEnv names the variable holding the test PostgreSQL URL (CI sets
// it from .ci/postgres).
const PostgresEnv = "AGENTCTL_TEST_POSTGRES"

// Backend is one database a suite runs against.
type Backend struct {
	// Name is "sqlite" or "postgres", used as the subtest name.
	Name string
	// DSN returns the --db value of a fresh, migrated, empty database
	// (a file in tb.TempDir(), or a schema of its own on PostgreSQL).
	DSN func(tb testing.TB) string
	// Open opens a fresh database (DSN) and closes it when the test ends.
	Open func(tb testing.TB, opts events.Options) *events.DB
}

// Backends is the table of backends every backend-neutral suite runs on:
// SQLite always, PostgreSQL when AGENTCTL_TEST_POSTGRES is set. Without
// the variable the PostgreSQL entry is a subtest that skips, except under
// CI (CI set), where it fails: CI must run it.
func Backends(tb testing.TB) []Backend {
	open := func(dsn func(testing.TB) string) func(testing.TB, events.Options) *events.DB {
		return func(tb testing.TB, opts events.Options) *events.DB {
			tb.Helper()
			return OpenDB(tb, dsn(tb), opts)
		}
	}
	sqlite := func(tb testing.TB) string { return filepath.Join(tb.TempDir(), "agentctl.db") }
	return []Backend{
		{Name: "sqlite", DSN: sqlite, Open: open(sqlite)},
		{Name: "postgres", DSN: PostgresDB, Open: open(PostgresDB)},
	}
}

// PostgresURL is the test server's URL; it skips tb when none is set
// outside CI and fails it under CI.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("%s is not set under CI: run .ci/postgres and export its URL", PostgresEnv)
		}
		tb.Skipf("%s not set (run `bash .ci/postgres` or start a PostgreSQL and export its URL)", PostgresEnv)
	}
	return dsn
}

// PostgresDB creates a schema of its own for tb on the test server,
// migrates it, drops it when the test ends and returns a URL whose
// search_path selects it: tests are isolated and can run in parallel.
func PostgresDB(tb testing.TB) string {
	tb.Helper()
	dsn := PostgresEmptyDB(tb)
	if _, _, err := events.Migrate(context.Background(), dsn, events.Options{}); err != nil {
		tb.Fatalf("postgres: migrate: %v", err)
	}
	return dsn
}

// PostgresEmptyDB is PostgresDB without the migration: an empty schema of
// tb's own, for tests of `db migrate` and of the schema checks.
func PostgresEmptyDB(tb testing.TB) string {
	tb.Helper()
	base := PostgresURL(tb)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatalf("postgres: %v", err)
	}
	tb.Cleanup(func() { _ = admin.Close() })
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, `CREATE SCHEMA `+schema); err != nil {
		tb.Fatalf("postgres: create schema: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), `DROP SCHEMA `+schema+` CASCADE`); err != nil {
			tb.Errorf("postgres: drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("postgres: %s: %v", PostgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// EachBackend runs fn as one subtest per backend (named by Backend.Name).
func EachBackend(t *testing.T, fn func(t *testing.T, b Backend)) {
	t.Helper()
	for _, b := range Backends(t) {
		t.Run(b.Name, func(t *testing.T) { fn(t, b) })
	}
}
