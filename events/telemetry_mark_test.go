package events_test

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestTelemetryMark: how far a run's telemetry was exported is a settings
// row per run (0 when none), overwritten by each export, that goes with
// the run when it is pruned.
func TestTelemetryMark(t *testing.T) {
	ctx := context.Background()
	db := mustOpen(t, t.TempDir()+"/a.db")
	for _, run := range []string{"run-a", "run-b"} {
		appendType(t, db, run, "run.created")
		appendType(t, db, run, "run.finished")
	}
	mark := func(run string) int64 {
		t.Helper()
		n, err := db.TelemetryMark(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if mark("run-a") != 0 {
		t.Fatal("a run never exported has a mark")
	}
	for _, seq := range []int64{1, 2} {
		for _, run := range []string{"run-a", "run-b"} {
			if err := db.SetTelemetryMark(ctx, run, seq); err != nil {
				t.Fatal(err)
			}
		}
	}
	if mark("run-a") != 2 || mark("run-b") != 2 {
		t.Fatalf("marks %d %d, want 2", mark("run-a"), mark("run-b"))
	}
	if err := db.Prune(ctx, []string{"run-a"}, nil); err != nil {
		t.Fatal(err)
	}
	if mark("run-a") != 0 || mark("run-b") != 2 {
		t.Fatalf("after pruning run-a: marks %d %d, want 0 and 2", mark("run-a"), mark("run-b"))
	}
}

// TestTelemetryMark_EachBackend: the mark reads and writes on SQLite and
// PostgreSQL alike (one upsert of a settings row).
func TestTelemetryMark_EachBackend(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		ctx := context.Background()
		db := b.Open(t, events.Options{})
		appendType(t, db, "run-a", "run.created")
		for _, seq := range []int64{1, 7} {
			if err := db.SetTelemetryMark(ctx, "run-a", seq); err != nil {
				t.Fatal(err)
			}
			if n, err := db.TelemetryMark(ctx, "run-a"); err != nil || n != seq {
				t.Fatalf("mark %d (%v), want %d", n, err, seq)
			}
		}
	})
}
