package events

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/jmoiron/sqlx"

	"github.com/agentctl/agentctl/migrations"
)

// PostgreSQL backend (docs/POSTGRES.md): the same tables, the same SQL text
// (Handle rebinds ? to $N), the same hash chain. What differs lives here:
// opening through pgx's stdlib driver under sqlx's "pgx" name, the schema
// check (PostgreSQL is migrated by `agentctl db migrate`, never implicitly),
// SQLSTATE classification, and the per-run writer lease (lease.go; a
// worker's claims, lease_claim.go; the heartbeat, lease_heartbeat.go).

// IsPostgres reports whether dsn is a postgres:// or postgresql:// URL
// rather than a SQLite path.
func IsPostgres(dsn string) bool {
	l := strings.ToLower(dsn)
	return strings.HasPrefix(l, "postgres://") || strings.HasPrefix(l, "postgresql://")
}

// RedactDSN is dsn without its password (in the user info or a password
// query parameter), for messages and logs; a path is returned unchanged.
func RedactDSN(dsn string) string {
	if !IsPostgres(dsn) {
		return dsn
	}
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// DSN is a --db value whose String never shows a password.
type DSN string

func (d DSN) String() string { return RedactDSN(string(d)) }

// pgMaxIdleConns is how many idle connections the pool keeps (openPostgres).
const pgMaxIdleConns = 8

// openPostgres connects, checks the schema version and loads the
// encryption settings.
func openPostgres(ctx context.Context, dsn string, opts Options) (*DB, error) {
	red := RedactDSN(dsn)
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, &Error{Op: "open", Path: red, Err: err}
	}
	switch opts.Durability {
	case "", DurabilityFull:
	case DurabilityNormal:
		// The commit returns before the WAL is flushed: a crash of the
		// database may lose the last commits, never corrupt the log.
		cfg.RuntimeParams["synchronous_commit"] = "off"
	default:
		return nil, &Error{Op: "open", Path: red, Err: fmt.Errorf("unknown durability %q (want full or normal)", opts.Durability)}
	}
	if opts.BusyTimeout > 0 {
		cfg.RuntimeParams["lock_timeout"] = fmt.Sprint(opts.BusyTimeout.Milliseconds())
	}
	if opts.ReadOnly {
		cfg.RuntimeParams["default_transaction_read_only"] = "on"
	}
	if _, set := cfg.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		// agentctl never leaves a transaction waiting on a person; one left
		// open by a paused process would hold the row locks a takeover of
		// its runs needs, so the server ends it after a lease's life.
		ttl := opts.LeaseTTL
		if ttl <= 0 {
			ttl = DefaultLeaseTTL
		}
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(ttl.Milliseconds())
	}
	sdb := sql.OpenDB(stdlib.GetConnector(*cfg))
	// The group-commit writer needs one connection; readers, the owner's
	// advisory-lock session and a worker's concurrent runs the rest. Up to
	// 8 kept idle (for 30 s at most): with 2, a busy worker opened about
	// one new server session per run (BENCHMARKS.md, PostgreSQL), and a
	// fleet of workers still fits in the server's max_connections.
	sdb.SetMaxOpenConns(32)
	sdb.SetMaxIdleConns(pgMaxIdleConns)
	sdb.SetConnMaxIdleTime(30 * time.Second)
	x := &Handle{sqlx.NewDb(sdb, "pgx")}
	db := &DB{x: x, path: red, backend: migrations.Postgres, Now: time.Now, tips: map[string]tip{}, pg: newPGState(opts.LeaseTTL)}
	fail := func(op string, err error) (*DB, error) {
		_ = sdb.Close()
		return nil, &Error{Op: op, Path: red, Err: classify(err)}
	}
	v, encrypted, mayDelete, err := pgOpenState(ctx, sdb)
	if err != nil {
		return fail("open", err)
	}
	if mayDelete != nil {
		db.knowDeletePrivilege(*mayDelete)
	}
	if err := migrations.CheckPostgres(v); err != nil {
		return fail("open", err)
	}
	db.enc = &codec{legacy: map[string]bool{}}
	if encrypted {
		if db.enc, err = loadCodec(ctx, x, nil); err != nil {
			return fail("open: read encryption settings", err)
		}
	}
	return db, nil
}

// pgOpenState reads what Open checks before anything else, the schema
// version and whether encryption is on, and what the first AppendFinal
// would otherwise ask (whether this role may delete run_leases rows), in
// one statement on the simple protocol: one round trip on the new
// connection, where reading them one by one (each prepared first) took six
// and a `run` process pays them every time (issue 34). Asked later, the
// privilege cost a round trip, and with runs in flight a second server
// session, opened and warmed while the runs waited (BENCHMARKS.md, session
// 16). A database without agentctl's tables (never migrated, or half made)
// fails that statement with undefined_table (42P01) and is read the long
// way, which says what is missing; mayDelete is then nil (asked at the
// first AppendFinal, as before). Only an encrypted database reads its keys
// (loadCodec, the same settings rows either way).
func pgOpenState(ctx context.Context, sdb *sql.DB) (version int, encrypted bool, mayDelete *bool, err error) {
	var may bool
	err = sdb.QueryRowContext(ctx,
		`SELECT COALESCE((SELECT MAX(version) FROM agentctl_schema), 0), EXISTS (SELECT 1 FROM settings WHERE name = $1), has_table_privilege('run_leases', 'DELETE')`,
		pgx.QueryExecModeSimpleProtocol, settingKEK).Scan(&version, &encrypted, &may)
	if pgCode(err) == sqlstateUndefinedTable {
		version, err = migrations.PostgresVersion(ctx, sdb)
		return version, true, nil, err
	}
	if err != nil {
		return 0, false, nil, fmt.Errorf("read schema version: %w", err)
	}
	return version, encrypted, &may, nil
}

// Migrate brings the database at path to this binary's schema and returns
// the versions before and after: `agentctl db migrate`. PostgreSQL is
// migrated under an advisory lock, one transaction per migration; a SQLite
// file is migrated as Open always does.
func Migrate(ctx context.Context, path string, opts Options) (from, to int, err error) {
	if !IsPostgres(path) {
		if _, err := os.Stat(path); err == nil {
			if from, err = sqliteVersion(ctx, path); err != nil {
				return 0, 0, err
			}
		}
		db, err := Open(ctx, path, opts)
		if err != nil {
			return from, from, err
		}
		return from, migrations.Latest, db.Close()
	}
	red := RedactDSN(path)
	cfg, err := pgx.ParseConfig(path)
	if err != nil {
		return 0, 0, &Error{Op: "migrate", Path: red, Err: err}
	}
	sdb := sql.OpenDB(stdlib.GetConnector(*cfg))
	defer sdb.Close()
	from, to, err = migrations.ApplyPostgres(ctx, sdb)
	if err != nil {
		return from, to, &Error{Op: "migrate", Path: red, Err: classify(err)}
	}
	return from, to, nil
}

// PostgreSQL's SQLSTATEs that agentctl acts on.
const (
	sqlstateUniqueViolation = "23505"
	sqlstateUndefinedTable  = "42P01" // pgOpenState: agentctl's tables are not there
	sqlstateChainCheck      = "AG001" // the events_checked trigger (migrations/sql/postgres 0009; events_chain before)
	sqlstateFenceLost       = "AG002" // agentctl_fence_held: the appender's lease is gone
	sqlstateFenceBusy       = "AG003" // agentctl_fence_free: another process holds a live lease
	sqlstateSerialization   = "40001"
	sqlstateDeadlock        = "40P01"
)

// pgCode is err's SQLSTATE, "" when it is not a PostgreSQL error.
func pgCode(err error) string {
	if pe := pgError(err); pe != nil {
		return pe.Code
	}
	return ""
}

// pgError is the PostgreSQL error inside err, or nil.
func pgError(err error) *pgconn.PgError {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe
	}
	return nil
}

// classifyPostgres keeps a PostgreSQL error as it is: its text already
// ends with "(SQLSTATE xxxxx)", which the CLI's exit-5 message shows.
func classifyPostgres(err error) error { return err }

// appendConflict reports whether an INSERT into events failed because
// another writer appended first (the primary key or the chain trigger, on
// either backend): the caller must reload the tail.
func appendConflict(err error) bool {
	c := pgCode(err)
	return c == sqlstateUniqueViolation || c == sqlstateChainCheck || sqliteAppendConflict(err)
}

// retryable reports a transaction PostgreSQL aborted for another's sake
// (serialization failure, deadlock): running it again is safe.
func retryable(err error) bool {
	c := pgCode(err)
	return c == sqlstateSerialization || c == sqlstateDeadlock
}

// maxAppendRetries bounds how often a retryable append is tried again.
const maxAppendRetries = 5
