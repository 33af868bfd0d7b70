package migrations

import (
	"context"
	"database/sql"
	"fmt"
)

// advisoryKey is the pg_advisory_xact_lock key every migration of an
// agentctl database takes ("agentctl" in ASCII).
const advisoryKey int64 = 0x6167656e7463746c

// versionTable records the applied PostgreSQL schema version: one row per
// migration, so the version is the highest.
const versionTable = `CREATE TABLE IF NOT EXISTS agentctl_schema (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`

// PostgresVersion reads the applied schema version of a PostgreSQL
// database (0 for one agentctl never migrated).
func PostgresVersion(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) (int, error) {
	var exists bool
	if err := q.QueryRowContext(ctx, `SELECT to_regclass('agentctl_schema') IS NOT NULL`).Scan(&exists); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v int
	if err := q.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM agentctl_schema`).Scan(&v); err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// CheckPostgres refuses a PostgreSQL database at any version but
// LatestPostgres, saying what to do.
func CheckPostgres(v int) error {
	if err := CheckVersionFor(Postgres, v); err != nil {
		return err
	}
	if v < LatestPostgres {
		return fmt.Errorf("%w: database is at version %d, this agentctl needs %d; run `agentctl db migrate` (with the same --db)", ErrOlderSchema, v, LatestPostgres)
	}
	return nil
}

// ApplyPostgres runs every PostgreSQL migration above the database's
// version: one transaction each, under pg_advisory_xact_lock, re-reading
// the version inside the lock so a concurrent migrator's work is not
// repeated. It returns the version before and after.
func ApplyPostgres(ctx context.Context, db *sql.DB) (from, to int, err error) {
	all, err := AllFor(Postgres)
	if err != nil {
		return 0, 0, err
	}
	from = -1
	for _, m := range all {
		v, err := applyPostgresOne(ctx, db, m)
		if from < 0 {
			from = v
		}
		if err != nil {
			return from, v, err
		}
		to = max(v, m.Version)
	}
	return from, to, nil
}

// applyPostgresOne applies m unless the database already has it and
// returns the version it found.
func applyPostgresOne(ctx context.Context, db *sql.DB, m Migration) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("migration %s: begin: %w", m.Name, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, advisoryKey); err != nil {
		return 0, fmt.Errorf("migration %s: lock: %w", m.Name, err)
	}
	if _, err := tx.ExecContext(ctx, versionTable); err != nil {
		return 0, fmt.Errorf("migration %s: version table: %w", m.Name, err)
	}
	v, err := PostgresVersion(ctx, tx)
	if err != nil {
		return 0, err
	}
	if err := CheckVersionFor(Postgres, v); err != nil {
		return v, err
	}
	if v >= m.Version {
		return v, nil
	}
	if v != m.Version-1 {
		return v, fmt.Errorf("migration %s: database at version %d, expected %d", m.Name, v, m.Version-1)
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return v, fmt.Errorf("migration %s: %w", m.Name, err)
	}
	if err := runGoStep(ctx, tx, Postgres, m); err != nil {
		return v, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO agentctl_schema (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
		return v, fmt.Errorf("migration %s: set version: %w", m.Name, err)
	}
	if err := tx.Commit(); err != nil {
		return v, fmt.Errorf("migration %s: commit: %w", m.Name, err)
	}
	return v, nil
}
