package events

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/mattn/go-sqlite3"

	"github.com/agentctl/agentctl/migrations"
)

// Durability says how hard a commit waits for the disk.
type Durability string

const (
	// DurabilityFull fsyncs every commit (synchronous=FULL): the default.
	DurabilityFull Durability = "full"
	// DurabilityNormal is the explicit opt-out (synchronous=NORMAL in WAL mode:
	// a power loss may drop the last commits, never corrupt the log).
	DurabilityNormal Durability = "normal"
)

// DefaultBusyTimeout is how long a writer waits for another process's lock.
const DefaultBusyTimeout = 10 * time.Second

// Options tune Open; the zero value is full durability and a 10 s busy timeout.
type Options struct {
	Durability  Durability
	BusyTimeout time.Duration
	// ReadOnly opens an existing database without migrating it.
	ReadOnly bool
	// MaxPageCount, when positive, caps the database at that many pages
	// (PRAGMA max_page_count on every connection): a write past it fails
	// with SQLITE_FULL, as on a full disk. For tests; 0 = no cap.
	MaxPageCount int
	// LeaseTTL is how long a PostgreSQL run lease lasts without a
	// heartbeat (renewed every LeaseTTL/3); ≤ 0 means DefaultLeaseTTL.
	// SQLite ignores it: its run lock dies with the process.
	LeaseTTL time.Duration
}

// Error is a storage failure; the CLI maps it to exit code 5.
type Error struct {
	Op   string
	Path string
	Err  error
}

func (e *Error) Error() string {
	if e.Path != "" {
		return fmt.Sprintf("storage: %s %s: %v", e.Op, e.Path, e.Err)
	}
	return fmt.Sprintf("storage: %s: %v", e.Op, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// ErrHardLinked refuses a SQLite database file that has more than one
// name (hard link): each name would get its own write-ahead log.
var ErrHardLinked = errors.New("database file has several hard links")

// ErrBusy means another writer held the database past the busy timeout.
var ErrBusy = errors.New("database is locked by another writer")

// DB is the event log over one SQLite file or one PostgreSQL database. It
// is safe for concurrent use; writes are serialised inside the process and
// by the database across processes.
type DB struct {
	x       *Handle
	path    string // the SQLite file, or the PostgreSQL URL without its password
	backend migrations.Backend
	// Now stamps created_at; tests may replace it.
	Now func() time.Time

	wmu   sync.Mutex // held by the group-commit leader for its batch, and by key changes
	group writeGroup
	tips  map[string]tip
	stmts stmtCache
	// rebound caches rebind's PostgreSQL statement texts (tx.go).
	rebound  sync.Map
	reboundN atomic.Int64
	enc      *codec // payload encryption state (codec.go)
	ckpt     *checkpointer
	locks    runLocks
	creds    credLocks   // per-key locks of UpdateCredential (credentials.go)
	pg       *pgState    // PostgreSQL only (postgres.go)
	lite     *liteWriter // SQLite only: the writer's connection (litetx.go), under wmu
}

type tip struct {
	seq  int64
	hash string
}

// Open opens (creating if needed) the database at path, refuses a schema
// newer than this binary before touching the file, and migrates it.
//
// A postgres:// or postgresql:// URL opens a PostgreSQL database instead
// (postgres.go); it is not migrated here but refused unless `agentctl db
// migrate` (Migrate) brought it to this binary's schema.
func Open(ctx context.Context, path string, opts Options) (*DB, error) {
	if IsPostgres(path) {
		return openPostgres(ctx, path, opts)
	}
	if opts.Durability == "" {
		opts.Durability = DurabilityFull
	}
	if opts.BusyTimeout == 0 {
		opts.BusyTimeout = DefaultBusyTimeout
	}
	syncMode := "FULL"
	switch opts.Durability {
	case DurabilityFull:
	case DurabilityNormal:
		syncMode = "NORMAL"
	default:
		return nil, &Error{Op: "open", Path: path, Err: fmt.Errorf("unknown durability %q (want full or normal)", opts.Durability)}
	}
	if fi, err := os.Stat(path); err == nil {
		if n := hardLinks(fi); n > 1 {
			// SQLite keeps a database's WAL and shared memory beside the
			// name it was opened by: two names of one file are two
			// unsynchronised views of it (sqlite.org/howtocorrupt.html).
			return nil, &Error{Op: "open", Path: path, Err: fmt.Errorf("%w: the file has %d hard links; SQLite's -wal and -shm files follow the name, so open it by one name only (remove the other links, or use a symlink)", ErrHardLinked, n)}
		}
		if err := checkExisting(ctx, path); err != nil {
			return nil, err
		}
	} else if opts.ReadOnly {
		return nil, &Error{Op: "open", Path: path, Err: fmt.Errorf("no database: %w", err)}
	}
	q := url.Values{}
	q.Set("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
	q.Set("_foreign_keys", "on")
	q.Set("_txlock", "immediate")
	if opts.ReadOnly {
		q.Set("mode", "ro")
	} else {
		q.Set("_journal_mode", "WAL")
		q.Set("_synchronous", syncMode)
	}
	if vfs := sqliteVFS(); vfs != "" {
		q.Set("vfs", vfs)
	}
	dsn := "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
	var err error
	x := &Handle{sqlx.NewDb(sql.OpenDB(hookConnector{dsn: dsn, d: &sqlite3.SQLiteDriver{ConnectHook: func(c *sqlite3.SQLiteConn) error {
		if !opts.ReadOnly {
			if err := connExec(c, fmt.Sprintf("PRAGMA wal_autocheckpoint = %d", autoCheckpointPages)); err != nil {
				return err
			}
		}
		if opts.MaxPageCount > 0 {
			return connExec(c, fmt.Sprintf("PRAGMA max_page_count = %d", opts.MaxPageCount))
		}
		return nil
	}}}), "sqlite3")}
	db := &DB{x: x, path: path, backend: migrations.SQLite, Now: time.Now, tips: map[string]tip{}}
	if err := db.init(ctx, opts.ReadOnly); err != nil {
		_ = x.Close()
		return nil, err
	}
	if db.enc, err = loadCodec(ctx, x, nil); err != nil {
		_ = x.Close()
		return nil, &Error{Op: "open: read encryption settings", Path: path, Err: classify(err)}
	}
	// The file SQLite opened: run locks are keyed on it (runlock.go).
	if db.locks.id, err = os.Stat(path); err != nil {
		_ = x.Close()
		return nil, &Error{Op: "open", Path: path, Err: err}
	}
	if !opts.ReadOnly {
		if err := db.startCheckpointer(); err != nil {
			_ = x.Close()
			return nil, &Error{Op: "open: checkpointer", Path: path, Err: classify(err)}
		}
	}
	return db, nil
}

// hookConnector opens connections through a driver whose ConnectHook sets
// each connection's pragmas (the writers' checkpoint bound,
// Options.MaxPageCount).
type hookConnector struct {
	dsn string
	d   *sqlite3.SQLiteDriver
}

func (c hookConnector) Connect(context.Context) (driver.Conn, error) { return c.d.Open(c.dsn) }
func (c hookConnector) Driver() driver.Driver                        { return c.d }

// checkExisting reads the schema version through a read-only connection so
// that a newer or foreign file is refused without a single byte changing.
func checkExisting(ctx context.Context, path string) error {
	v, err := sqliteVersion(ctx, path)
	if err != nil {
		return err
	}
	if err := migrations.CheckVersion(v); err != nil {
		return &Error{Op: "open", Path: path, Err: err}
	}
	return nil
}

func (db *DB) init(ctx context.Context, readOnly bool) error {
	if !readOnly {
		var mode string
		if err := db.x.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
			return &Error{Op: "open", Path: db.path, Err: classify(err)}
		}
		if mode != "wal" {
			return &Error{Op: "open", Path: db.path, Err: fmt.Errorf("journal_mode is %q, want wal", mode)}
		}
		if _, _, err := migrations.Apply(ctx, db.x.DB); err != nil {
			return &Error{Op: "migrate", Path: db.path, Err: classify(err)}
		}
		return nil
	}
	v, err := migrations.Version(ctx, db.x.DB)
	if err != nil {
		return &Error{Op: "open", Path: db.path, Err: classify(err)}
	}
	if v != migrations.Latest {
		return &Error{Op: "open", Path: db.path, Err: fmt.Errorf("schema version %d, want %d (open it read-write once to migrate)", v, migrations.Latest)}
	}
	return nil
}

// Close closes the database.
func (db *DB) Close() error {
	db.stopCheckpointer()
	db.wmu.Lock()
	db.closeLite()
	db.wmu.Unlock()
	db.locks.close()
	db.pg.close(db)
	db.stmts.close()
	return db.x.Close()
}

// Path is the file the database lives in, or the PostgreSQL URL without
// its password.
func (db *DB) Path() string { return db.path }

// Backend says which database the log lives in.
func (db *DB) Backend() migrations.Backend { return db.backend }

// SQL exposes the handle to packages that fold or read projections.
func (db *DB) SQL() *Handle { return db.x }

// classify turns SQLite's busy/locked codes into ErrBusy, by code, not
// text, and names a PostgreSQL error's SQLSTATE (postgres.go).
func classify(err error) error {
	if isBusy(err) {
		return fmt.Errorf("%w: %v", ErrBusy, err)
	}
	return classifyPostgres(err)
}

// sqliteVersion reads an existing file's schema version read-only.
func sqliteVersion(ctx context.Context, path string) (int, error) {
	ro, err := sql.Open("sqlite3", "file:"+(&url.URL{Path: path}).EscapedPath()+"?mode=ro&_busy_timeout=5000")
	if err != nil {
		return 0, &Error{Op: "open", Path: path, Err: err}
	}
	defer ro.Close()
	v, err := migrations.Version(ctx, ro)
	if err != nil {
		return 0, &Error{Op: "open", Path: path, Err: classify(err)}
	}
	return v, nil
}
