//go:build cgo

package events

import (
	"errors"
	"strings"

	"github.com/mattn/go-sqlite3"
)

// connExec runs one statement on a raw connection (from the ConnectHook).
func connExec(c *sqlite3.SQLiteConn, query string) error {
	_, err := c.Exec(query, nil)
	return err
}

// isBusy reports SQLite's busy/locked codes, by code, not text.
func isBusy(err error) bool {
	var se sqlite3.Error
	if errors.As(err, &se) {
		return se.Code == sqlite3.ErrBusy || se.Code == sqlite3.ErrLocked
	}
	return false
}

// sqliteAppendConflict reports an events INSERT refused because the run's
// log moved on: the primary key (run_id, seq) or the dense-seq trigger.
func sqliteAppendConflict(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) || se.Code != sqlite3.ErrConstraint {
		return false
	}
	return se.ExtendedCode == sqlite3.ErrConstraintPrimaryKey ||
		(se.ExtendedCode == sqlite3.ErrConstraintTrigger && strings.Contains(se.Error(), "dense"))
}
