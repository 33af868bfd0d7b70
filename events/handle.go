package events

import (
	"context"
	"database/sql"
	"errors"

	"github.com/jmoiron/sqlx"
)

// sqlxDB names the embedded handle so that Handle.DB stays the *sql.DB.
type sqlxDB = sqlx.DB

// Handle is the database handle packages read projections through. Queries
// are written once with ? placeholders; Handle rebinds them for the
// backend (PostgreSQL's $N), so SQL text is shared by SQLite and PostgreSQL.
type Handle struct {
	*sqlxDB
}

// GetContext is sqlx's GetContext with the query rebound for the backend.
func (h *Handle) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	return h.sqlxDB.GetContext(ctx, dest, h.Rebind(query), args...)
}

// SelectContext is sqlx's SelectContext with the query rebound.
func (h *Handle) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	return h.sqlxDB.SelectContext(ctx, dest, h.Rebind(query), args...)
}

// ExecContext is database/sql's ExecContext with the query rebound.
func (h *Handle) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return h.sqlxDB.ExecContext(ctx, h.Rebind(query), args...)
}

// QueryxContext is sqlx's QueryxContext with the query rebound.
func (h *Handle) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	return h.sqlxDB.QueryxContext(ctx, h.Rebind(query), args...)
}

// QueryRowxContext is sqlx's QueryRowxContext with the query rebound.
func (h *Handle) QueryRowxContext(ctx context.Context, query string, args ...any) *sqlx.Row {
	return h.sqlxDB.QueryRowxContext(ctx, h.Rebind(query), args...)
}

// QueryContext is database/sql's QueryContext with the query rebound.
func (h *Handle) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return h.sqlxDB.QueryContext(ctx, h.Rebind(query), args...)
}

// QueryRowContext is database/sql's QueryRowContext with the query rebound.
func (h *Handle) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return h.sqlxDB.QueryRowContext(ctx, h.Rebind(query), args...)
}

// Get is GetContext without a context (tests).
func (h *Handle) Get(dest any, query string, args ...any) error {
	return h.GetContext(context.Background(), dest, query, args...)
}

// Select is SelectContext without a context (tests).
func (h *Handle) Select(dest any, query string, args ...any) error {
	return h.SelectContext(context.Background(), dest, query, args...)
}

// Exec is ExecContext without a context (tests).
func (h *Handle) Exec(query string, args ...any) (sql.Result, error) {
	return h.ExecContext(context.Background(), query, args...)
}

// Queryx is QueryxContext without a context (tests).
func (h *Handle) Queryx(query string, args ...any) (*sqlx.Rows, error) {
	return h.QueryxContext(context.Background(), query, args...)
}

// BeginTxx starts a transaction whose queries are rebound too.
func (h *Handle) BeginTxx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	tx, err := h.sqlxDB.BeginTxx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &Tx{Tx: tx}, nil
}

// The transaction's sqlx methods, rebound like Handle's. On a pipelined
// PostgreSQL append (an Applier's tx) ExecContext queues like Exec, and
// the multi-row reads refuse: an Applier reads with QueryRow.

// errPipeRead refuses a multi-row read inside an append: pipelined on
// PostgreSQL, on the writer's own connection on SQLite.
var errPipeRead = errors.New("events: an append's Applier reads with Tx.QueryRow only")

// appending reports an append's transaction (pgpipe.go, litetx.go), which
// is not the embedded sqlx one.
func (t *Tx) appending() bool { return t.pipe != nil || t.lite != nil }

// ExecContext runs query (rebound) outside the statement cache.
func (t *Tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.appending() {
		return t.Exec(ctx, query, args...)
	}
	return t.Tx.ExecContext(ctx, t.Rebind(query), args...)
}

// GetContext is sqlx's GetContext with the query rebound.
func (t *Tx) GetContext(ctx context.Context, dest any, query string, args ...any) error {
	if t.appending() {
		return errPipeRead
	}
	return t.Tx.GetContext(ctx, dest, t.Rebind(query), args...)
}

// SelectContext is sqlx's SelectContext with the query rebound.
func (t *Tx) SelectContext(ctx context.Context, dest any, query string, args ...any) error {
	if t.appending() {
		return errPipeRead
	}
	return t.Tx.SelectContext(ctx, dest, t.Rebind(query), args...)
}

// QueryxContext is sqlx's QueryxContext with the query rebound.
func (t *Tx) QueryxContext(ctx context.Context, query string, args ...any) (*sqlx.Rows, error) {
	if t.appending() {
		return nil, errPipeRead
	}
	return t.Tx.QueryxContext(ctx, t.Rebind(query), args...)
}

// QueryContext is database/sql's QueryContext with the query rebound.
func (t *Tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if t.appending() {
		return nil, errPipeRead
	}
	return t.Tx.QueryContext(ctx, t.Rebind(query), args...)
}

// Query is QueryContext without a context (tests).
func (h *Handle) Query(query string, args ...any) (*sql.Rows, error) {
	return h.QueryContext(context.Background(), query, args...)
}
