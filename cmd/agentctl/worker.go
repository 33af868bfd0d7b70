package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/worker"
)

// workerResult is the data of a WorkerResult envelope.
type workerResult struct {
	Runs []worker.Result `json:"runs"`
	// Stopped: the worker ended on a signal, not because the queue was drained.
	Stopped bool `json:"stopped"`
	// LeaseLosses counts the runs whose lease this worker lost (PostgreSQL;
	// always 0 on SQLite): another worker took them over.
	LeaseLosses int64 `json:"leaseLosses"`
}

// workerFlags are worker's flags.
type workerFlags struct {
	concurrency int
	drain       bool
	grace       time.Duration
	poll        time.Duration
	metricsAddr string
	lease       time.Duration
	// noSessionReuse: every run opens its own MCP sessions.
	noSessionReuse bool
}

// check refuses flag values the library would read as its defaults: a
// user who writes --grace 0 must not get 30 s without a word.
func (f *workerFlags) check() error {
	switch {
	case f.concurrency < 1:
		return usageErr("--concurrency %d: want 1 or more", f.concurrency)
	case f.grace <= 0:
		return usageErr("--grace %s: want more than 0", f.grace)
	case f.poll <= 0:
		return usageErr("--poll %s: want more than 0", f.poll)
	case f.lease < 300*time.Millisecond:
		return usageErr("--lease %s: want 300ms or more", f.lease)
	}
	return nil
}

func (a *app) workerCmd() *cobra.Command {
	var f workerFlags
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Execute queued runs, several at once, and resume runs whose process died",
		Long: `worker claims runs queued by "agentctl submit" and executes them, up to --concurrency at once in
this one process (their commits are shared). It also resumes runs left running by a process that
died (their run lock on the database file is free), by the rules of "agentctl resume": a call found sent
with no outcome is redispatched only if its idempotency allows it, else it ends uncertain.

On PostgreSQL, workers on any number of machines share the queue: each claims runs with a lease
(--lease, renewed every third of it) and every append checks it. A run whose lease expired (its
worker died or was paused) is taken over by another worker and resumed by the same rules; the
worker that lost it writes nothing more to it ("run X: lease lost at epoch N; another worker
owns it", state lease_lost).

With --drain the worker exits 0 once nothing is left to take. Without it, it polls the database
for new runs until SIGTERM or SIGINT; then it takes no new run, lets each run finish the task in
flight and stops it before its next task (resumable), waiting at most --grace. Runs still in
flight after the grace period are left as they are for a later worker or resume (exit 130).
Leases of runs that stopped are released, so another worker resumes them at once.

The runs of one worker share MCP sessions: a run borrows the session (and tool catalog) another
run opened with the same remote identity (URL, resolved credentials, protocol pin), and records
session.opened with borrowedFrom and a copy of the catalog, so its log stands alone. An expired
session leaves the pool. Remotes with an OAuth auth block and stdio servers are not shared;
--no-session-reuse makes every run open its own.`,
		Example: `  agentctl submit wf.yaml --input query=mcp && agentctl worker --drain
  agentctl worker --concurrency 8 --grace 1m
  agentctl worker --db postgres://agentctl@db/agentctl --concurrency 8 --lease 10s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			// Its runs' widths are unknown until they are claimed: one
			// lane per run it executes at once.
			a.fitLanes(f.concurrency)
			return a.runWorker(cmd.Context(), f)
		},
	}
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 4, "runs executed at once")
	cmd.Flags().BoolVar(&f.drain, "drain", false, "exit 0 once no queued or orphaned run is left")
	durationVar(cmd, false, &f.grace, "grace", 30*time.Second, "after SIGTERM/SIGINT, how long runs in flight may take to reach their next task")
	durationVar(cmd, false, &f.lease, "lease", 30*time.Second, "PostgreSQL: how long a run's lease lasts without a heartbeat (renewed every third of it)")
	durationVar(cmd, false, &f.poll, "poll", 200*time.Millisecond, "how often to look for new runs")
	cmd.Flags().BoolVar(&f.noSessionReuse, "no-session-reuse", false, "every run opens its own MCP sessions (by default runs share a remote's session and tool catalog when its URL, credentials and protocol pin are the same)")
	cmd.Flags().StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics and /healthz on this address (e.g. 127.0.0.1:9464; a bare :PORT binds 127.0.0.1, any other host is used with a warning when it is not loopback); empty: none")
	return cmd
}

// runWorker runs a worker with flags f until the queue is drained or ctx
// ends, and prints what it did.
func (a *app) runWorker(ctx context.Context, f workerFlags) error {
	a.leaseTTL = f.lease
	db, err := a.openDB(ctx)
	if err != nil {
		return err
	}
	w := a.newWorker(db, f)
	stopMetrics, err := a.serveWorkerMetrics(f.metricsAddr, w)
	if err != nil {
		_ = db.Close()
		return err
	}
	defer stopMetrics()
	a.startTelemetry(db)
	runs, err := w.Run(ctx)
	if errors.Is(err, worker.ErrGraceExpired) {
		// Runs are still appending: leave the database open, the
		// process exit ends them as a crash would (resumable).
		return &exitError{code: workflow.ExitCancelled, err: err}
	}
	defer db.Close()
	defer a.closeTelemetry() // before the database closes
	if err != nil {
		return err
	}
	if runs == nil {
		runs = []worker.Result{}
	}
	res := workerResult{Runs: runs, Stopped: ctx.Err() != nil, LeaseLosses: db.LeaseLosses()}
	switch a.output {
	case "json":
		return a.printJSON(a.stdout, "WorkerResult", true, res)
	case "human":
		how := "queue drained"
		if res.Stopped {
			how = "stopped"
		}
		lost := ""
		if events.IsPostgres(db.Path()) {
			lost = fmt.Sprintf(", %d lease(s) lost", res.LeaseLosses)
		}
		fmt.Fprintf(a.stderr, "worker: %s, %d run(s) taken%s\n", how, len(runs), lost)
	}
	return nil
}

// newWorker is the worker of flags f over db, reporting what it does on
// stderr (human) or stdout (jsonl).
func (a *app) newWorker(db *events.DB, f workerFlags) *worker.Worker {
	human := a.output == "human"
	return &worker.Worker{DB: db, Concurrency: f.concurrency, Drain: f.drain, Grace: f.grace, Poll: f.poll, NoSessionReuse: f.noSessionReuse,
		NewRunner: func() *workflow.Runner {
			r := &workflow.Runner{UserAgent: "agentctl/" + version, AllowPlaintextCredentials: a.allowPlaintextCreds}
			a.wireTelemetry(db, r)
			if testHooks.runner != nil {
				testHooks.runner(r)
			}
			return r
		},
		Started: func(id string, resumed bool) {
			if human {
				verb := "started"
				if resumed {
					verb = "resuming"
				}
				fmt.Fprintf(a.stderr, "run %s %s\n", id, verb)
			}
		},
		Transient: func(err error) {
			if human {
				fmt.Fprintf(a.stderr, "worker: database: %s; trying again\n", clean(err.Error()))
			}
		},
		Stopping: func() {
			if human {
				fmt.Fprintf(a.stderr, "worker: stopping: no new runs; runs in flight stop before their next task (at most %s)\n", f.grace)
			}
		},
		Finished: func(r worker.Result) {
			switch {
			case a.output == "jsonl":
				_ = a.printJSON(a.stdout, "WorkerRun", r.Error == nil, r)
			case human && r.State == worker.StateLeaseLost:
				fmt.Fprintf(a.stderr, "%s\n", clean(*r.Error))
			case human && r.Error != nil:
				fmt.Fprintf(a.stderr, "run %s %s: %s\n", r.RunID, r.State, clean(*r.Error))
			case human:
				fmt.Fprintf(a.stderr, "run %s %s\n", r.RunID, r.State)
			}
		},
	}
}
