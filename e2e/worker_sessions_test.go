package e2e

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/tspeer"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
	"github.com/agentctl/agentctl/workflow/spec"
	"github.com/agentctl/agentctl/workflow/worker"
)

// TestWorkerSharesSession: a worker draining 4 one-call runs, 2 at once,
// against real peers (the TypeScript reference server, the Go SDK server
// stateful and stateless) opens one session: one run records it in full,
// the 3 others borrow it (session.opened borrowedFrom, the same session
// id digest). Every run succeeds and replays from its own log.
func TestWorkerSharesSession(t *testing.T) {
	peers := []struct {
		name string
		url  func(t *testing.T) string
		tool string
	}{
		{"typescript", func(t *testing.T) string { return tspeer.Start(t) }, "echo"},
		{"go-sdk-stateful", func(t *testing.T) string { _, u := demotest.StartTest(t, demoserver.Options{}); return u }, "echo"},
		{"go-sdk-stateless", func(t *testing.T) string {
			_, u := demotest.StartTest(t, demoserver.Options{Stateless: true, JSONResponse: true})
			return u
		}, "echo"},
	}
	for _, p := range peers {
		t.Run(p.name, func(t *testing.T) {
			const runs = 4
			ctx := context.Background()
			wf, err := spec.Parse("e2e.yaml", []byte(workflowYAML(p.url(t), step{id: "say", tool: p.tool, idem: "at_most_once", args: "{message: hi}"})))
			if err != nil {
				t.Fatal(err)
			}
			db := openDB(t)
			for range runs {
				if _, err := (&workflow.Runner{DB: db}).Submit(ctx, wf, nil, workflow.RunOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			out, err := (&worker.Worker{DB: db, Concurrency: 2, Drain: true,
				NewRunner: func() *workflow.Runner { return &workflow.Runner{UserAgent: "agentctl-e2e"} }}).Run(ctx)
			if err != nil || len(out) != runs {
				t.Fatalf("worker: %d runs, %v", len(out), err)
			}
			borrowed, digests := 0, map[string]bool{}
			for _, r := range out {
				if r.State != workflow.StateSucceeded {
					t.Fatalf("run %+v", r)
				}
				opened := decodeAll[vocab.SessionOpened](t, runEvents(t, db, r.RunID), vocab.TypeSessionOpened)
				if len(opened) != 1 {
					t.Fatalf("run %s: %d sessions", r.RunID, len(opened))
				}
				if opened[0].BorrowedFrom != nil {
					borrowed++
				}
				digests[opened[0].SessionIDDigest] = true
				verifyChain(t, db, r.RunID)
				rp, err := replay.Prepare(ctx, db, r.RunID)
				if err != nil {
					t.Fatal(err)
				}
				res, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(ctx, rp.Workflow, rp.Inputs, workflow.RunOptions{Mode: "replay", SourceRunID: r.RunID})
				if err != nil || res.Err != nil {
					t.Fatalf("replay of %s: %v %v", r.RunID, err, res.Err)
				}
			}
			if borrowed != runs-1 || len(digests) != 1 {
				t.Fatalf("%d runs borrowed, %d session id digests; want %d and 1", borrowed, len(digests), runs-1)
			}
		})
	}
}
