package worker_test

import (
	"context"
	"testing"

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
			c0 := db.CommitStats().Commits
			b.ResetTimer()
			w := &worker.Worker{DB: db, Concurrency: 1, Drain: true, Name: "bench",
				NewRunner: func() *workflow.Runner { return &workflow.Runner{} }}
			out, err := w.Run(ctx)
			b.StopTimer()
			if err != nil || len(out) != b.N {
				b.Fatalf("drained %d runs of %d: %v", len(out), b.N, err)
			}
			b.ReportMetric(float64(db.CommitStats().Commits-c0)/float64(b.N), "appends-commits/run")
		})
	}
}
