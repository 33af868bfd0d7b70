package events_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
)

// BenchmarkGroupCommit: 1, 8 and 64 goroutines append one event at a time,
// each to its own run (the shape of concurrent tasks and runs in one
// process), at FULL and NORMAL; b.N appends in all. It reports appends/s,
// commits/s and appends per commit: at FULL, appenders that arrive during
// one fsync share the next.
func BenchmarkGroupCommit(b *testing.B) {
	for _, d := range []events.Durability{events.DurabilityFull, events.DurabilityNormal} {
		for _, n := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("%s/appenders=%d", d, n), func(b *testing.B) {
				db, err := events.Open(context.Background(), filepath.Join(b.TempDir(), "b.db"), events.Options{Durability: d})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				payload := map[string]any{"effectId": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "from": "prepared", "to": "dispatched", "trigger": "send"}
				before := db.CommitStats()
				var left atomic.Int64
				left.Store(int64(b.N))
				var wg sync.WaitGroup
				errs := make(chan error, n)
				b.ResetTimer()
				start := time.Now()
				for g := 0; g < n; g++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						run := fmt.Sprintf("run-%d", g)
						for left.Add(-1) >= 0 {
							if _, err := db.Append(context.Background(), run, []events.Record{{Stream: "call/x", Type: "call.transition", Payload: payload}}, nil); err != nil {
								errs <- err
								return
							}
						}
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				st := db.CommitStats()
				commits, appends := st.Commits-before.Commits, st.Appends-before.Appends
				b.ReportMetric(float64(appends)/elapsed.Seconds(), "appends/s")
				b.ReportMetric(float64(commits)/elapsed.Seconds(), "commits/s")
				b.ReportMetric(float64(appends)/float64(commits), "appends/commit")
			})
		}
	}
}
