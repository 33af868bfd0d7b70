package workflow_test

import (
	"context"
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
