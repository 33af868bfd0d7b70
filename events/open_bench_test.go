package events_test

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// BenchmarkOpenPostgres is what every agentctl process on PostgreSQL pays
// before its first statement (issue 34, the process's fixed cost): a new
// connection (the server forks a backend, SCRAM authentication), the schema
// version check and the encryption settings, then Close.
func BenchmarkOpenPostgres(b *testing.B) {
	dsn := testkit.PostgresDB(b)
	ctx := context.Background()
	for b.Loop() {
		db, err := events.Open(ctx, dsn, events.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := db.Close(); err != nil {
			b.Fatal(err)
		}
	}
}
