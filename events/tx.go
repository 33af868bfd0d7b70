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
}

// Exec runs query with args through the database's statement cache.
func (t *Tx) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(ctx, args...)
}

// QueryRow runs a single-row query through the database's statement cache.
func (t *Tx) QueryRow(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	st, err := t.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	return st.QueryRowContext(ctx, args...), nil
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
