// Package migrations brings an agentctl database to the schema this binary
// understands. Migrations are embedded, numbered SQL files per backend
// (sql/sqlite, sql/postgres) applied in order, one transaction each (a
// migration whose work SQL cannot express also has a Go step, run after
// its SQL in that transaction: steps.go). On
// SQLite the applied version is PRAGMA user_version; on PostgreSQL it is
// the agentctl_schema table, and every migration runs under
// pg_advisory_xact_lock so two processes starting together do not race.
// A database with a newer version than this binary's is refused and never
// modified.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
)

//go:embed sql/sqlite/*.sql sql/postgres/*.sql
var files embed.FS

// Backend names a family of migrations.
type Backend string

const (
	// SQLite is the embedded default backend.
	SQLite Backend = "sqlite"
	// Postgres is the shared backend of a fleet of workers.
	Postgres Backend = "postgres"
)

// Latest is the schema version a fresh SQLite database ends at.
const Latest = 21

// LatestPostgres is the schema version a migrated PostgreSQL database ends at.
const LatestPostgres = 12

// LatestFor is the current schema version of backend b.
func LatestFor(b Backend) int {
	if b == Postgres {
		return LatestPostgres
	}
	return Latest
}

// ErrNewerSchema reports a database written by a newer agentctl; it is never modified.
var ErrNewerSchema = errors.New("migrations: database schema is newer than this binary supports")

// ErrOlderSchema reports a PostgreSQL database that `agentctl db migrate`
// has not brought to this binary's schema yet.
var ErrOlderSchema = errors.New("migrations: database schema is older than this binary needs")

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// All returns the embedded SQLite migrations in version order.
func All() ([]Migration, error) { return AllFor(SQLite) }

// AllFor returns backend b's embedded migrations in version order.
func AllFor(b Backend) ([]Migration, error) {
	dir := "sql/" + string(b)
	entries, err := fs.ReadDir(files, dir)
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok {
			return nil, fmt.Errorf("migration %q: name must be NNNN_description.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration %q: %w", name, err)
		}
		body, err := files.ReadFile(dir + "/" + name)
		if err != nil {
			return nil, fmt.Errorf("read migration %q: %w", name, err)
		}
		out = append(out, Migration{Version: v, Name: name, SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %q: expected version %d", m.Name, i+1)
		}
	}
	if n := len(out); n != LatestFor(b) {
		return nil, fmt.Errorf("%s migrations: %d files, Latest says %d", b, n, LatestFor(b))
	}
	return out, nil
}

// Version reads PRAGMA user_version.
func Version(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	if err := db.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// CheckVersion refuses a SQLite version newer than Latest.
func CheckVersion(v int) error { return CheckVersionFor(SQLite, v) }

// CheckVersionFor refuses a version of backend b newer than this binary's.
func CheckVersionFor(b Backend, v int) error {
	if l := LatestFor(b); v > l {
		return fmt.Errorf("%w: database is at version %d, this agentctl knows up to %d; upgrade agentctl", ErrNewerSchema, v, l)
	}
	return nil
}

// Apply runs every SQLite migration above the database's version, one
// transaction each, and returns the version before and after.
func Apply(ctx context.Context, db *sql.DB) (from, to int, err error) {
	from, err = Version(ctx, db)
	if err != nil {
		return 0, 0, err
	}
	if err := CheckVersion(from); err != nil {
		return from, from, err
	}
	all, err := All()
	if err != nil {
		return from, from, err
	}
	to = from
	for _, m := range all {
		if m.Version <= to {
			continue
		}
		if err := applyOne(ctx, db, m); err != nil {
			return from, to, err
		}
		to = m.Version
	}
	return from, to, nil
}

func applyOne(ctx context.Context, db *sql.DB, m Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer func() { _ = tx.Rollback() }()
	// Re-read inside the transaction: another process may have migrated meanwhile.
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return fmt.Errorf("migration %s: read version: %w", m.Name, err)
	}
	if v >= m.Version {
		return nil
	}
	if v != m.Version-1 {
		return fmt.Errorf("migration %s: database at version %d, expected %d", m.Name, v, m.Version-1)
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if err := runGoStep(ctx, tx, SQLite, m); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", m.Version)); err != nil {
		return fmt.Errorf("migration %s: set version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return nil
}
