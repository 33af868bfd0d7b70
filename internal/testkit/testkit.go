// Package testkit holds test helpers that several packages share. It
// imports testing, so only tests import it.
package testkit

import (
	"context"
	"path/filepath"
	"strings"
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
		tb.Fatalf("open db %s: %v", events.RedactDSN(path), err)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// EvidenceGroups replaces each run of frame lines ("mcp. …") and of
// replay.frames lines (a replay references the frames it answered with
// instead of copying them) by one "frames" line, so that the described log
// of a source run and of its replay compare step by step.
func EvidenceGroups(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "mcp.") || strings.HasPrefix(l, "replay.frames") {
			if len(out) > 0 && out[len(out)-1] == "frames" {
				continue
			}
			l = "frames"
		}
		out = append(out, l)
	}
	return out
}
