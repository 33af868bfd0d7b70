//go:build unix

package worker_test

import (
	"context"
	"runtime/metrics"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/worker"
)

// BenchmarkWorkerDrain is the worker's side of the peer benchmark's
// many-runs shapes: b.N queued one-call runs (submitted untimed) drained
// by one Worker with Concurrency 1, per backend; its CPU profile is the
// per-run cost of claiming, starting, executing and finishing a run.
// cpu-µs/run is the process's CPU (user + system) per run during the
// drain: the worker's and the in-process test server's; goroutines/run and
// vcsw/run (its threads' voluntary context switches) count the hand-offs that CPU
// goes to beside the run's own work.
func BenchmarkWorkerDrain(b *testing.B) {
	for _, be := range testkit.Backends(b) {
		b.Run(be.Name, func(b *testing.B) {
			db := be.Open(b, events.Options{})
			srv := mcptest.Start(b, mcptest.Options{}, actTool())
			wf := mustParse(b, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`))
			ctx := context.Background()
			for range b.N {
				if _, err := (&workflow.Runner{DB: db}).Submit(ctx, wf, map[string]any{}, workflow.RunOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			c0, cpu0, g0, sw0 := db.CommitStats().Commits, processCPU(), goroutinesCreated(), contextSwitches()
			b.ResetTimer()
			w := &worker.Worker{DB: db, Concurrency: 1, Drain: true, Name: "bench",
				NewRunner: func() *workflow.Runner { return &workflow.Runner{} }}
			out, err := w.Run(ctx)
			b.StopTimer()
			if err != nil || len(out) != b.N {
				b.Fatalf("drained %d runs of %d: %v", len(out), b.N, err)
			}
			b.ReportMetric(float64(db.CommitStats().Commits-c0)/float64(b.N), "appends-commits/run")
			b.ReportMetric(float64((processCPU()-cpu0).Microseconds())/float64(b.N), "cpu-µs/run")
			b.ReportMetric(float64(goroutinesCreated()-g0)/float64(b.N), "goroutines/run")
			b.ReportMetric(float64(contextSwitches()-sw0)/float64(b.N), "vcsw/run")
		})
	}
}

// goroutinesCreated is how many goroutines this process has started: a
// goroutine per run is a wake-up of another thread, CPU the scheduler
// spends beside the run's own work.
func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// contextSwitches is how many times this process's threads gave up the
// CPU of their own accord (preemptions, which the machine's load decides,
// aside): each is a thread that slept and had to be woken, the kernel's
// side of a goroutine handed a wake-up.
func contextSwitches() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Nvcsw
}

// processCPU is the CPU time this process has used (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
