package workflow_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// TestPostgres_DurableCallRoundTrips holds a sequential run's durable calls
// on PostgreSQL to their number of database round trips, counted on the
// wire by a relay between agentctl and the server: a call is one commit,
// and a commit's statements (fence, event rows, projection writes, COMMIT)
// travel as one pipelined batch. Before the pipeline a call took 19.2
// round trips here; now 1.1 (the one-time lease claim and release and the
// tip read are the rest).
func TestPostgres_DurableCallRoundTrips(t *testing.T) {
	const calls = 20
	relay, dsn := testkit.NewPGRelay(t, testkit.PostgresDB(t))
	db := testkit.OpenDB(t, dsn, events.Options{})
	_, url := demotest.StartTest(t, demoserver.Options{})
	ctx := context.Background()
	run := func(n int) (trips, commits int64) {
		wf, err := spec.Parse("rt.yaml", []byte(manyCalls(url, n)))
		if err != nil {
			t.Fatal(err)
		}
		t0, c0 := relay.RoundTrips(), db.CommitStats().Commits
		res, err := (&workflow.Runner{DB: db}).Run(ctx, wf, nil, workflow.RunOptions{})
		if err != nil || res.Err != nil {
			t.Fatalf("run: %v %v", err, res.Err)
		}
		return relay.RoundTrips() - t0, db.CommitStats().Commits - c0
	}
	run(1) // prepares the statements on the connection
	one, c1 := run(1)
	many, cn := run(1 + calls)
	perCall, commits := float64(many-one)/calls, float64(cn-c1)/calls
	t.Logf("round trips: run of 1 call %d (%d commits), of %d calls %d (%d commits): %.1f per call, %.1f commits per call",
		one, c1, 1+calls, many, cn, perCall, commits)
	if perCall > 1.5 || commits > 1.2 {
		t.Errorf("%.1f round trips and %.1f commits per durable call, want at most 1.5 and 1.2", perCall, commits)
	}
}

// TestPostgres_RunsInFlightOneServerSession: one process executing many
// short runs at once (`run --inputs --runs-in-flight`, the Go API with a
// session pool) keeps to the one PostgreSQL connection its group-commit
// writer needs. Each new server session costs the runs waiting on it the
// server's start and a cold first commit (about 50 ms here); the first
// AppendFinal used to ask the role's DELETE privilege on a connection of
// its own while the writer held the first, and every later commit then
// took turns on both (BENCHMARKS.md, session 16).
func TestPostgres_RunsInFlightOneServerSession(t *testing.T) {
	const runs, inFlight = 16, 8
	relay, dsn := testkit.NewPGRelay(t, testkit.PostgresDB(t))
	db := testkit.OpenDB(t, dsn, events.Options{})
	_, url := demotest.StartTest(t, demoserver.Options{})
	wf, err := spec.Parse("one.yaml", []byte(manyCalls(url, 1)))
	if err != nil {
		t.Fatal(err)
	}
	pool := workflow.NewSessionPool()
	t.Cleanup(pool.Close)
	ctx := context.Background()
	errs := make(chan error, runs)
	var wg sync.WaitGroup
	for g := range inFlight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range runs / inFlight {
				res, err := (&workflow.Runner{DB: db, Sessions: pool}).Run(ctx, wf, nil, workflow.RunOptions{})
				if err == nil && res.Err != nil {
					err = res.Err
				}
				if err != nil {
					errs <- fmt.Errorf("lane %d: %w", g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := relay.Connections(); n != 1 {
		t.Errorf("%d runs, %d in flight, opened %d PostgreSQL connections, want 1", runs, inFlight, n)
	}
}
