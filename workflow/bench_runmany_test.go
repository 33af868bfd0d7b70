package workflow_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// BenchmarkRunMany measures the direct path of many one-call runs in one
// process (`agentctl run --inputs`, bench/peers' many-runs shapes): b.N
// runs of a one-call workflow through Runner.Run, K at once, one Runner
// per slot and one shared SessionPool, no observer. ns/op, B/op and
// allocs/op are per run (the client's work, the server in this process
// too); on SQLite (durability normal: the commit's fsync left out) and on
// PostgreSQL (AGENTCTL_TEST_POSTGRES).
func BenchmarkRunMany(b *testing.B) {
	_, url := demotest.StartTest(b, demoserver.Options{})
	wf, err := spec.Parse("one.yaml", []byte(manyCalls(url, 1)))
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, db *events.DB, k int) {
		pool := workflow.NewSessionPool()
		defer pool.Close()
		ctx := context.Background()
		var next atomic.Int64
		var failed atomic.Value
		var wg sync.WaitGroup
		b.ReportAllocs()
		b.ResetTimer()
		for range k {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &workflow.Runner{DB: db, Sessions: pool}
				for next.Add(1) <= int64(b.N) {
					res, err := r.Run(ctx, wf, nil, workflow.RunOptions{Command: "run"})
					if err == nil && res.Err != nil {
						err = res.Err
					}
					if err != nil {
						failed.Store(err)
						return
					}
				}
			}()
		}
		wg.Wait()
		if err, _ := failed.Load().(error); err != nil {
			b.Fatal(err)
		}
	}
	for _, k := range []int{1, 8} {
		b.Run("sqlite-normal/k="+strconv.Itoa(k), func(b *testing.B) { run(b, openBenchDB(b, events.DurabilityNormal), k) })
		b.Run("postgres/k="+strconv.Itoa(k), func(b *testing.B) { run(b, testkit.OpenDB(b, testkit.PostgresDB(b), events.Options{}), k) })
	}
}
