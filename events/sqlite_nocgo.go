//go:build !cgo

package events

import (
	"context"
	"database/sql"
	"errors"

	"github.com/mattn/go-sqlite3"
)

// errNoCgo: go-sqlite3 is C; a CGO_ENABLED=0 build (the cross-compiled vet
// of `make cross`) type-checks but cannot open a database.
var errNoCgo = errors.New("this agentctl was built without cgo and has no SQLite")

func connExec(*sqlite3.SQLiteConn, string) error { return errNoCgo }

func isBusy(error) bool { return false }

func sqliteAppendConflict(error) bool { return false }

// liteTx has no connection without cgo: withLite refuses (Open already did).
type liteTx struct{}

type liteWriter struct{}

func (db *DB) withLite(context.Context, func(*Tx)) error { return errNoCgo }

func (db *DB) closeLite() {}

func (*liteTx) exec(context.Context, string, []any) (sql.Result, error) { return nil, errNoCgo }

func (*liteTx) queryRow(context.Context, string, []any) (Row, error) { return nil, errNoCgo }

func (*liteTx) commit() error { return errNoCgo }

func (*liteTx) rollback() error { return errNoCgo }
