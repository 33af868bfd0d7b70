package events

import (
	"context"
	"database/sql"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"
)

// Tx is one write transaction of the log. Exec reuses statements prepared
// once per database, so a protocol step does not pay SQLite's prepare for
// every insert and projection update.
type Tx struct {
	*sqlx.Tx
	db *DB
	// bound holds the cached statements bound to this transaction, so a
	// batch of many events binds each statement once, not once per row.
	bound map[string]*sql.Stmt
	// pipe, on a PostgreSQL append, queues the writes (pgpipe.go); nil
	// otherwise, and then Tx is the embedded sqlx transaction.
	pipe *pgPipe
	// lite, on a SQLite append, is the writer's own connection
	// (litetx.go); nil otherwise.
	lite *liteTx
}

// rebind is db.x.Rebind(query) (PostgreSQL's $n placeholders), kept per
// query: sqlx rebuilds the text on every call, and an append's statements
// are a few hundred constant texts. At most maxRebound are kept.
func (db *DB) rebind(query string) string {
	if v, ok := db.rebound.Load(query); ok {
		return v.(string)
	}
	r := db.x.Rebind(query)
	if db.reboundN.Add(1) <= maxRebound {
		db.rebound.Store(query, r)
	}
	return r
}

// maxRebound bounds DB.rebind's cache (a statement text built from data
// would otherwise grow it without end).
const maxRebound = 4096

// Exec runs query with args through the database's statement cache.
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.pipe != nil {
		t.pipe.queue(t.db.rebind(query), args, nil)
		return pipedResult{}, nil
	}
	if t.lite != nil {
		return t.lite.exec(ctx, query, args)
	}
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryRow runs a single-row query through the database's statement cache
// (on a PostgreSQL append, after sending what is queued).
func (t *Tx) QueryRow(ctx context.Context, query string, args ...any) (Row, error) {
	if t.pipe != nil {
		if err := t.pipe.flush(ctx); err != nil {
			return nil, err
		}
		return pgRow{t.pipe.conn.QueryRow(ctx, t.db.rebind(query), args...)}, nil
	}
	if t.lite != nil {
		return t.lite.queryRow(ctx, query, args)
	}
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryRowContext(ctx, args...), nil
}

// execWrap is Exec whose error, when it happens, is shaped by wrap: at
// once on SQLite, at the next flush on a PostgreSQL append.
func (t *Tx) execWrap(ctx context.Context, wrap func(error) error, query string, args ...any) error {
	if t.pipe != nil {
		t.pipe.queue(t.db.rebind(query), args, wrap)
		return nil
	}
	if _, err := t.Exec(ctx, query, args...); err != nil {
		return wrap(err)
	}
	return nil
}

// flush sends a PostgreSQL append's queued statements and returns the
// first error among them; it does nothing on SQLite, where each ran at once.
func (t *Tx) flush(ctx context.Context) error {
	if t.pipe == nil {
		return nil
	}
	return t.pipe.flush(ctx)
}

// Pipelined reports a PostgreSQL append transaction, whose writes are
// queued and whose reads cost a round trip each: an Applier then prefers
// a write that reads in SQL (INSERT … SELECT) to a read and a write.
func (t *Tx) Pipelined() bool { return t.pipe != nil }

// Commit commits the transaction.
func (t *Tx) Commit() error {
	if t.pipe != nil {
		return t.commitPipe()
	}
	if t.lite != nil {
		return t.lite.commit()
	}
	return t.Tx.Commit()
}

// Rollback aborts the transaction; after Commit it is a no-op error.
func (t *Tx) Rollback() error {
	if t.pipe != nil {
		return t.rollbackPipe()
	}
	if t.lite != nil {
		return t.lite.rollback()
	}
	return t.Tx.Rollback()
}

func (t *Tx) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := t.bound[query]; ok {
		return st, nil
	}
	pst, err := t.db.stmts.get(ctx, t.db.x, query)
	if err != nil {
		return nil, err
	}
	st := t.Tx.StmtContext(ctx, pst)
	if t.bound == nil {
		t.bound = map[string]*sql.Stmt{}
	}
	t.bound[query] = st
	return st, nil
}

// BeginTx starts a write transaction (BEGIN IMMEDIATE on SQLite) outside Append, for
// maintenance such as rebuilding projections.
func (db *DB) BeginTx(ctx context.Context) (*Tx, error) {
	tx, err := db.x.BeginTxx(ctx, nil)
	if err != nil {
		return nil, &Error{Op: "begin", Path: db.path, Err: classify(err)}
	}
	tx.db = db
	return tx, nil
}

// stmtCache holds statements prepared on the pool; database/sql re-prepares
// one on another connection only when it must.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

func (c *stmtCache) get(ctx context.Context, x *Handle, query string) (*sql.Stmt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[query]; ok {
		return st, nil
	}
	st, err := x.PrepareContext(ctx, x.Rebind(query))
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", classify(err))
	}
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	c.m[query] = st
	return st, nil
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		_ = st.Close()
	}
	c.m = nil
}
