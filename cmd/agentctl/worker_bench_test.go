package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// BenchmarkWorkerThroughput (issue 14): 200 one-call runs (one
// at_most_once call of an mcptest tool on 127.0.0.1) executed two ways in
// each round, interleaved: queued with submit and drained by one
// `agentctl worker --drain --concurrency 8` process ("worker"), and as 200
// `agentctl run` processes, 8 at a time ("procs"), each on a fresh
// database at the durability named. Submitting is not timed. It reports
// both rates in calls/s over all rounds and their ratio (target ≥ 3).
func BenchmarkWorkerThroughput(b *testing.B) {
	const runs, conc = 200, 8
	bin := buildAgentctl(b)
	srv := mcptest.Start(b, mcptest.Options{}, mcptest.ToolDef{Name: "a"})
	wfPath := benchWorkflow(b, srv.URL, "a", 1)
	wf, err := spec.Load(wfPath)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, d := range []string{"full", "normal"} {
		b.Run(d, func(b *testing.B) {
			var workerTime, procsTime time.Duration
			for i := 0; i < b.N; i++ {
				// worker: queue 200 runs, then time one worker draining them.
				db := filepath.Join(b.TempDir(), "w.db")
				edb, err := events.Open(ctx, db, events.Options{Durability: events.DurabilityNormal})
				if err != nil {
					b.Fatal(err)
				}
				r := &workflow.Runner{DB: edb}
				for range runs {
					if _, err := r.Submit(ctx, wf, map[string]any{}, workflow.RunOptions{}); err != nil {
						b.Fatal(err)
					}
				}
				_ = edb.Close()
				start := time.Now()
				out, err := exec.Command(bin, "worker", "--drain", "--concurrency", fmt.Sprint(conc), "--db", db, "--durability", d).CombinedOutput()
				workerTime += time.Since(start)
				if err != nil {
					b.Fatalf("worker: %v\n%s", err, out)
				}

				// procs: 200 `agentctl run` processes, 8 at a time.
				db = filepath.Join(b.TempDir(), "p.db")
				if edb, err = events.Open(ctx, db, events.Options{}); err != nil {
					b.Fatal(err)
				}
				_ = edb.Close()
				next := make(chan int, runs)
				for j := range runs {
					next <- j
				}
				close(next)
				var wg sync.WaitGroup
				errs := make(chan string, conc)
				start = time.Now()
				for range conc {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range next {
							if out, err := exec.Command(bin, "run", wfPath, "--db", db, "--durability", d, "--output", "json").CombinedOutput(); err != nil {
								errs <- fmt.Sprintf("run: %v\n%s", err, out)
								return
							}
						}
					}()
				}
				wg.Wait()
				procsTime += time.Since(start)
				close(errs)
				for e := range errs {
					b.Fatal(e)
				}
			}
			w := float64(runs*b.N) / workerTime.Seconds()
			p := float64(runs*b.N) / procsTime.Seconds()
			b.ReportMetric(w, "worker-calls/s")
			b.ReportMetric(p, "procs-calls/s")
			b.ReportMetric(w/p, "ratio")
		})
	}
}
