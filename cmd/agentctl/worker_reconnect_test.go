package main

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_WorkerKeepsLeasesAcrossReconnects (issue 27 items 5, 6): a
// worker executing an at_most_once call loses its server sessions, every
// one of them, while a second worker polls the same queue: by
// pg_terminate_backend (as a failover or an operator would), or by the
// server's idle_session_timeout (set in that worker's DSN only). The
// worker reconnects, retries what failed (counted in
// agentctl_worker_db_transient_errors_total) and renews its lease at the
// same epoch; the other worker takes nothing; the run succeeds with the
// call executed once; both workers exit 0 on SIGTERM.
func TestCLI_WorkerKeepsLeasesAcrossReconnects(t *testing.T) {
	for _, c := range []struct {
		name string
		// options is the worker's DSN options; terminate ends its sessions.
		options   string
		terminate bool
	}{
		{name: "pg_terminate_backend", terminate: true},
		{name: "idle_session_timeout", options: "-cidle_session_timeout=100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := testkit.PostgresDB(t)
			raw, err := sql.Open("pgx", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = raw.Close() })
			tool := newCountingTool()
			tool.blockAfter(0, 1)
			srv := mcptest.Start(t, mcptest.Options{}, tool.def())
			ids := submitN(t, dsn, queueWorkflow(t, srv.URL, 1), 1)

			var b [4]byte
			_, _ = rand.Read(b[:])
			app := "w1-" + hex.EncodeToString(b[:])
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("application_name", app)
			if c.options != "" {
				q.Set("options", c.options)
			}
			u.RawQuery = q.Encode()
			w1, base1 := startMetricsWorker(t, "--poll", "20ms", "--lease", "1500ms", "--db", u.String())
			select {
			case <-tool.entered:
			case <-time.After(60 * time.Second):
				t.Fatal("the run's call never arrived (a failsafe, not a synchronisation)")
			}
			w2, base2 := startMetricsWorker(t, "--poll", "20ms", "--lease", "1500ms", "--db", dsn)

			var owner string
			var epoch int64
			if err := raw.QueryRow(`SELECT owner, lease_epoch FROM run_leases WHERE run_id = $1`, ids[0]).Scan(&owner, &epoch); err != nil {
				t.Fatal(err)
			}
			// Three times: end w1's sessions (or let the server end them),
			// then wait for w1 to renew its lease on a new one. A takeover
			// ends the test at once.
			for round := range 3 {
				if c.terminate {
					var n int
					if err := raw.QueryRow(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n); err != nil {
						t.Fatal(err)
					}
				}
				var since time.Time
				if err := raw.QueryRow(`SELECT now()`).Scan(&since); err != nil {
					t.Fatal(err)
				}
				failsafe := time.Now().Add(60 * time.Second)
				for {
					var o string
					var e int64
					var expires time.Time
					if err := raw.QueryRow(`SELECT owner, lease_epoch, lease_expires_at FROM run_leases WHERE run_id = $1`, ids[0]).Scan(&o, &e, &expires); err != nil {
						t.Fatal(err)
					}
					if o != owner || e != epoch {
						t.Fatalf("round %d: run %s taken over: lease %s@%d, was %s@%d", round, ids[0], o, e, owner, epoch)
					}
					if expires.After(since.Add(1500 * time.Millisecond)) {
						break // renewed after the sessions ended
					}
					if time.Now().After(failsafe) {
						t.Fatalf("round %d: w1 never renewed its lease after its sessions ended", round)
					}
					time.Sleep(20 * time.Millisecond) // a poll interval, not a synchronisation
				}
			}
			m1 := scrape(t, base1)
			if c.terminate && m1[`agentctl_worker_db_transient_errors_total`] == 0 {
				t.Errorf("w1's transient errors = 0; want the failures on its terminated sessions counted")
			}
			if c.options != "" {
				// The timeout was in force in w1's sessions (which a poll
				// every 20 ms keeps busy; an idle one is ended, and the
				// pool's ping before reuse replaces it).
				probe, err := sql.Open("pgx", u.String())
				if err != nil {
					t.Fatal(err)
				}
				var v string
				err = probe.QueryRow(`SELECT current_setting('idle_session_timeout')`).Scan(&v)
				_ = probe.Close()
				if err != nil || v != "100ms" {
					t.Fatalf("idle_session_timeout in w1's sessions = %q, %v; want 100ms", v, err)
				}
			}
			tool.unblock()
			m1 = pollMetrics(t, base1, func(m map[string]float64) bool {
				return m[`agentctl_worker_runs_finished_total{state="succeeded"}`] == 1
			})
			if n := m1[`agentctl_worker_lease_losses_total`]; n != 0 {
				t.Errorf("w1 lost %v lease(s)", n)
			}
			if n := scrape(t, base2)[`agentctl_worker_runs_claimed_total{resumed="true"}`]; n != 0 {
				t.Errorf("w2 resumed %v run(s); want none", n)
			}
			stopMetricsWorker(t, w1)
			stopMetricsWorker(t, w2)
			if st := runStates(t, dsn)[ids[0]]; st != "succeeded" {
				t.Errorf("run %s: %s, want succeeded", ids[0], st)
			}
			if cs := tool.counts(); len(cs) != 1 || cs["0"] != 1 {
				t.Errorf("executions per argument = %v; want argument 0 once", cs)
			}
		})
	}
}

// TestCLI_WorkerIdleSurvivesAdminShutdown (issue 27 item 6): a worker
// without --drain, polling an empty queue, has every session terminated
// (57P01 admin_shutdown, as in a restart or a failover) three times. It
// does not exit: the failed looks are retried with backoff and counted,
// and a run submitted afterwards is executed; SIGTERM then ends it with 0.
func TestCLI_WorkerIdleSurvivesAdminShutdown(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = raw.Close() })
	var b [4]byte
	_, _ = rand.Read(b[:])
	app := "idle-" + hex.EncodeToString(b[:])
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	w, base := startMetricsWorker(t, "--poll", "20ms", "--db", u.String())
	for round := range 3 {
		var n int
		var at time.Time
		if err := raw.QueryRow(`SELECT count(pg_terminate_backend(pid)), now() FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n, &at); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("round %d: the worker has no session to terminate", round)
		}
		// The worker polls every 20 ms: it opens a new session.
		failsafe := time.Now().Add(60 * time.Second)
		for {
			if err := raw.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND backend_start > $2`, app, at).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n > 0 {
				break
			}
			if time.Now().After(failsafe) {
				t.Fatalf("round %d: the worker never connected again", round)
			}
			time.Sleep(20 * time.Millisecond) // a poll interval, not a synchronisation
		}
	}
	if m := scrape(t, base); m[`agentctl_worker_db_transient_errors_total`] == 0 {
		t.Errorf("transient errors = 0 after 3 rounds of terminated sessions; want them counted")
	}
	tool := newCountingTool()
	srv := mcptest.Start(t, mcptest.Options{}, tool.def())
	ids := submitN(t, dsn, queueWorkflow(t, srv.URL, 1), 1)
	pollMetrics(t, base, func(m map[string]float64) bool {
		return m[`agentctl_worker_runs_finished_total{state="succeeded"}`] == 1
	})
	stopMetricsWorker(t, w)
	if st := runStates(t, dsn)[ids[0]]; st != "succeeded" {
		t.Errorf("run %s: %s, want succeeded", ids[0], st)
	}
}
