package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestPostgres_RetryableAbortIsRetried: a transaction PostgreSQL aborts
// for another's sake (40001, 40P01) committed nothing, so the append runs
// again and its events are written once; any other SQLSTATE fails the
// append at once, named in the message.
func TestPostgres_RetryableAbortIsRetried(t *testing.T) {
	db := testkit.OpenDB(t, testkit.PostgresDB(t), events.Options{})
	ctx := context.Background()
	raise := func(code string) string {
		return `DO $$ BEGIN RAISE EXCEPTION 'injected' USING ERRCODE = '` + code + `'; END $$`
	}
	for _, code := range []string{"40001", "40P01"} {
		calls := 0
		evs, err := db.Append(ctx, "run-"+code, []events.Record{{Stream: "run", Type: "test.step"}}, func(ctx context.Context, tx *events.Tx, _ []events.Event) error {
			if calls++; calls == 1 {
				_, err := tx.ExecContext(ctx, raise(code))
				return err
			}
			return nil
		})
		if err != nil || len(evs) != 1 || calls != 2 {
			t.Fatalf("%s: append = %v, %v after %d tries; want one event after 2", code, evs, err, calls)
		}
		if n, err := db.VerifyRun(ctx, "run-"+code); err != nil || n != 1 {
			t.Fatalf("%s: VerifyRun = %d, %v; want 1 event", code, n, err)
		}
	}
	calls := 0
	_, err := db.Append(ctx, "run-other", []events.Record{{Stream: "run", Type: "test.step"}}, func(ctx context.Context, tx *events.Tx, _ []events.Event) error {
		calls++
		_, err := tx.ExecContext(ctx, raise("22012"))
		return err
	})
	if err == nil || calls != 1 || !strings.Contains(err.Error(), "SQLSTATE 22012") || errors.Is(err, events.ErrConflict) {
		t.Fatalf("err = %v after %d tries; want one try failing with SQLSTATE 22012", err, calls)
	}
	if ok, err := db.RunExists(ctx, "run-other"); err != nil || ok {
		t.Fatalf("RunExists = %v, %v; want nothing written", ok, err)
	}
}
