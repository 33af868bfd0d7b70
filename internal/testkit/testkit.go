// Package testkit holds test helpers that several packages share. It
// imports testing, so only tests import it.
package testkit

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// OpenDB opens the event log at path ("" = a fresh file in tb.TempDir()),
// fails the test if it cannot, and closes it when the test ends.
func OpenDB(tb testing.TB, path string, opts events.Options) *events.DB {
	tb.Helper()
	if path == "" {
		path = filepath.Join(tb.TempDir(), "agentctl.db")
	}
	db, err := events.Open(context.Background(), path, opts)
	if err != nil {
		tb.Fatalf("open db %s: %v", path, err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}
