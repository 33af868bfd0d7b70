package events_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestObserveCommits_ConcurrentAppenders: 8 goroutines append 25 events
// each, one at a time; the observer sees every committed event exactly
// once, in as many commits as CommitStats counts, on both backends.
func TestObserveCommits_ConcurrentAppenders(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		db := b.Open(t, events.Options{})
		var mu sync.Mutex
		commits, perRun := 0, map[string]int64{}
		db.ObserveCommits(func(ci events.CommitInfo) {
			mu.Lock()
			defer mu.Unlock()
			commits++
			for _, evs := range ci.Appends {
				for _, e := range evs {
					if e.Seq != perRun[e.RunID]+1 {
						t.Errorf("run %s: observed seq %d after %d", e.RunID, e.Seq, perRun[e.RunID])
					}
					perRun[e.RunID] = e.Seq
				}
			}
		})
		const goroutines, each = 8, 25
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					if _, err := db.Append(context.Background(), fmt.Sprintf("run-%d", g), []events.Record{{Stream: "run", Type: "test.step"}}, nil); err != nil {
						t.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if st := db.CommitStats(); int64(commits) != st.Commits {
			t.Errorf("observed %d commits, CommitStats says %d", commits, st.Commits)
		}
		for g := range goroutines {
			if n := perRun[fmt.Sprintf("run-%d", g)]; n != each {
				t.Errorf("run-%d: observed %d events, want %d", g, n, each)
			}
		}
	})
}

// TestDB_Ping: a reachable database answers; a closed one is a storage
// error naming the database without its password.
func TestDB_Ping(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		dsn := b.DSN(t)
		db, err := events.Open(context.Background(), dsn, events.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Ping(context.Background()); err != nil {
			t.Fatalf("ping: %v", err)
		}
		_ = db.Close()
		err = db.Ping(context.Background())
		var se *events.Error
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "ping") || !strings.Contains(err.Error(), events.RedactDSN(dsn)) {
			t.Fatalf("ping after close: %v, want a storage error naming %s", err, events.RedactDSN(dsn))
		}
		if u := strings.SplitN(strings.TrimPrefix(dsn, "postgres://"), "@", 2); events.IsPostgres(dsn) && len(u) == 2 && strings.Contains(u[0], ":") {
			if pw := u[0][strings.IndexByte(u[0], ':')+1:]; strings.Contains(err.Error(), ":"+pw+"@") {
				t.Fatalf("ping error shows the password: %v", err)
			}
		}
	})
}
