//go:build !cgo

package events

import (
	"errors"

	"github.com/mattn/go-sqlite3"
)

// errNoCgo: go-sqlite3 is C; a CGO_ENABLED=0 build (the cross-compiled vet
// of `make cross`) type-checks but cannot open a database.
var errNoCgo = errors.New("this agentctl was built without cgo and has no SQLite")

func connExec(*sqlite3.SQLiteConn, string) error { return errNoCgo }

func isBusy(error) bool { return false }

func sqliteAppendConflict(error) bool { return false }
