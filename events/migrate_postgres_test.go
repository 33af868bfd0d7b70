package events_test

import (
	"context"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/migrations"
)

// TestPostgres_ConcurrentMigrateAppliesEachOnce: four migrators started
// together on an empty database (as four processes running `agentctl db
// migrate` at once would, each on its own session) all succeed and end at
// the current version, and each migration is recorded exactly once: the
// advisory lock serialises them and each re-reads the version under it.
// Without the lock two of them create the same tables and one fails.
func TestPostgres_ConcurrentMigrateAppliesEachOnce(t *testing.T) {
	dsn := testkit.PostgresEmptyDB(t)
	ctx := context.Background()
	const n = 4
	var wg sync.WaitGroup
	start := make(chan struct{})
	froms, tos, errs := make([]int, n), make([]int, n), make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			froms[i], tos[i], errs[i] = events.Migrate(ctx, dsn, events.Options{})
		}()
	}
	close(start)
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil || tos[i] != migrations.LatestPostgres {
			t.Fatalf("migrator %d: %d -> %d, %v; want -> %d, no error", i, froms[i], tos[i], errs[i], migrations.LatestPostgres)
		}
		if froms[i] == 0 {
			fresh++
		}
	}
	if fresh == 0 {
		t.Fatalf("no migrator found the empty database (from = %v)", froms)
	}
	db := testkit.OpenDB(t, dsn, events.Options{})
	var rows []int
	if err := db.SQL().Select(&rows, `SELECT version FROM agentctl_schema ORDER BY version`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != migrations.LatestPostgres {
		t.Fatalf("agentctl_schema holds versions %v; want 1..%d once each", rows, migrations.LatestPostgres)
	}
	for i, v := range rows {
		if v != i+1 {
			t.Fatalf("agentctl_schema holds versions %v; want 1..%d once each", rows, migrations.LatestPostgres)
		}
	}
	if _, err := db.Append(ctx, "run-1", []events.Record{{Stream: "run", Type: "test.step"}}, nil); err != nil {
		t.Fatalf("append on the migrated database: %v", err)
	}
}
