package events

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckpointerCopiesTheWAL: after checkpointEvery commits the writer
// kicks the background checkpointer, whose PASSIVE checkpoint copies every
// frame of the WAL into the database (nothing else writes meanwhile).
func TestCheckpointerCopiesTheWAL(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "c.db"), Options{Durability: DurabilityNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ran := make(chan [2]int, 1)
	db.ckpt.ran = ran // before the first kick, which orders it for the goroutine
	for i := 0; i < checkpointEvery; i++ {
		if _, err := db.Append(context.Background(), "run-c", []Record{{Stream: "run", Type: "x", Payload: map[string]int{"i": i}}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case r := <-ran:
		if r[0] <= 0 || r[1] != r[0] {
			t.Fatalf("checkpoint: %d WAL frames, %d copied; want all of a non-empty WAL", r[0], r[1])
		}
	case <-time.After(30 * time.Second): // a bound for a failure, not a wait for success
		t.Fatal("no checkpoint after the kick")
	}
}
