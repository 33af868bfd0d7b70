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

// The ceilings TestQueuedRunCost holds a queued one-call run to, beyond
// its submit (one commit: run.created), as a worker drains it (issue 34's
// target: 3 commits per run, the claim, the call's intent and its
// outcome). On PostgreSQL every commit the server makes counts: the lease
// claim, the intent (carrying run.started), and the outcome (carrying
// run.finished and the lease's release); on SQLite the run lock is a
// kernel lock and only the log's commits count.
const (
	maxQueuedCommitsPG, maxQueuedCommitsSQLite = 3, 2
	// maxQueuedTripsPG: the claim (which reads run.created and its hash,
	// the tip of the intent's compare-and-append), the intent's commit,
	// the outcome's commit (with the lease's release); the drain's last
	// claim, which finds nothing, is shared by the runs.
	maxQueuedTripsPG = 3
	// maxQueuedRows: its 11 events (run.created, run.started, the
	// session's and the call's, task.finished, run.finished), the runs,
	// tasks, protocol_calls rows and the protocol_sessions row recording
	// the session it borrowed; the lease row is deleted at the end.
	maxQueuedRows = 15
)

// queuedCost is what draining n queued runs cost.
type queuedCost struct {
	commits, trips, stmts float64
	rows                  map[string]float64
}

// TestQueuedRunCost pins what a queued one-call run costs through a
// worker (a drain of 6 runs minus a drain of 2, per run, Concurrency 1),
// on each backend: the commits and, on PostgreSQL, the round trips and
// statements, counted on the wire by a relay; and the rows it leaves in
// the log and each projection table, submit included.
func TestQueuedRunCost(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		var relay *testkit.PGRelay
		var db *events.DB
		if b.Name == "postgres" {
			var dsn string
			relay, dsn = testkit.NewPGRelay(t, b.DSN(t))
			db = testkit.OpenDB(t, dsn, events.Options{})
		} else {
			db = b.Open(t, events.Options{})
		}
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		wf := mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`))
		ctx := context.Background()
		tables := []string{"events", "runs", "tasks", "protocol_sessions", "protocol_calls", "effects"}
		if relay != nil {
			tables = append(tables, "run_leases")
		}
		rows := func() map[string]int {
			m := map[string]int{}
			for _, tb := range tables {
				var n int
				if err := db.SQL().Get(&n, `SELECT count(*) FROM `+tb); err != nil {
					t.Fatalf("count %s: %v", tb, err)
				}
				m[tb] = n
			}
			return m
		}
		drain := func(n int) queuedCost {
			r0 := rows()
			for range n {
				if _, err := (&workflow.Runner{DB: db}).Submit(ctx, wf, map[string]any{}, workflow.RunOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			c0 := db.CommitStats().Commits
			var t0, s0, x0 int64
			if relay != nil {
				t0, s0, x0 = relay.RoundTrips(), relay.Statements(), relay.Commits()
			}
			w := &worker.Worker{DB: db, Concurrency: 1, Drain: true, Name: "cost",
				NewRunner: func() *workflow.Runner { return &workflow.Runner{} }}
			out, err := w.Run(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != n {
				t.Fatalf("worker took %d runs, want %d", len(out), n)
			}
			for _, r := range out {
				if r.State != workflow.StateSucceeded {
					t.Fatalf("run %+v", r)
				}
			}
			c := queuedCost{commits: float64(db.CommitStats().Commits - c0), rows: map[string]float64{}}
			if relay != nil {
				c.commits = float64(relay.Commits() - x0)
				c.trips, c.stmts = float64(relay.RoundTrips()-t0), float64(relay.Statements()-s0)
			}
			r1 := rows()
			for tb, v := range r1 {
				c.rows[tb] = float64(v - r0[tb])
			}
			return c
		}
		drain(1) // prepares the statements on the connections
		two, six := drain(2), drain(6)
		per := queuedCost{commits: (six.commits - two.commits) / 4, trips: (six.trips - two.trips) / 4,
			stmts: (six.stmts - two.stmts) / 4, rows: map[string]float64{}}
		var perRows float64
		for tb := range six.rows {
			per.rows[tb] = (six.rows[tb] - two.rows[tb]) / 4
			perRows += per.rows[tb]
		}
		t.Logf("per queued one-call run through the worker: %.2f commits, %.2f round trips, %.2f statements; %.2f rows %v",
			per.commits, per.trips, per.stmts, perRows, per.rows)
		t.Logf("a drain of 2 runs: %.0f commits, %.0f round trips, %.0f statements", two.commits, two.trips, two.stmts)
		maxCommits := float64(maxQueuedCommitsSQLite)
		if relay != nil {
			maxCommits = maxQueuedCommitsPG
			if per.trips > maxQueuedTripsPG {
				t.Errorf("a queued run costs %.2f round trips, want at most %d", per.trips, maxQueuedTripsPG)
			}
		}
		if per.commits > maxCommits {
			t.Errorf("a queued run costs %.2f commits, want at most %.0f", per.commits, maxCommits)
		}
		if perRows > maxQueuedRows {
			t.Errorf("a queued run leaves %.2f rows %v, want at most %d", perRows, per.rows, maxQueuedRows)
		}
	})
}
