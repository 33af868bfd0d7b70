package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/worker"
)

// `agentctl worker --metrics-addr`: Prometheus metrics on /metrics and a
// database health check on /healthz. The numbers come from two seams:
// events.DB.ObserveCommits (every durable commit: its latency, and the
// committed events, from which claims, call outcomes and redispatches are
// read) and worker.Worker.Finished (how each run this worker took ended
// its part). Each worker has a registry of its own, never the global one.

// metricsPrefix starts every metric name agentctl's worker exports.
const metricsPrefix = "agentctl_worker_"

// metricsQueryTimeout bounds the queries a scrape or a health check makes.
const metricsQueryTimeout = 2 * time.Second

// workerMetrics are one worker process's Prometheus metrics.
type workerMetrics struct {
	reg *prometheus.Registry
	db  *events.DB

	claimedQueued, claimedResumed prometheus.Counter
	finished                      *prometheus.CounterVec // label state
	calls                         map[fsm.State]prometheus.Counter
	redispatches, uncertain       prometheus.Counter
	commitLatency                 prometheus.Histogram
}

// callOutcomes are the terminal call states, each a value of the outcome
// label of agentctl_worker_calls_total (exported at 0 from the start).
var callOutcomes = []fsm.State{fsm.Succeeded, fsm.Failed, fsm.Uncertain, fsm.Cancelled}

// newWorkerMetrics registers the worker's metrics, with the Go runtime's
// and the process's (CPU, memory), in a registry of their own.
func newWorkerMetrics(db *events.DB) *workerMetrics {
	m := &workerMetrics{reg: prometheus.NewRegistry(), db: db, calls: map[fsm.State]prometheus.Counter{}}
	claimed := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "runs_claimed_total",
		Help: "Runs this worker claimed: queued runs started (resumed=false) and orphaned runs resumed (resumed=true).",
	}, []string{"resumed"})
	m.claimedQueued, m.claimedResumed = claimed.WithLabelValues("false"), claimed.WithLabelValues("true")
	m.finished = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "runs_finished_total",
		Help: "Runs whose part in this worker ended, by the run's state then (running: stopped before its next task, resumable).",
	}, []string{"state"})
	for _, s := range []string{workflow.StateSucceeded, workflow.StateFailed, workflow.StateUncertain, workflow.StateCancelled} {
		m.finished.WithLabelValues(s)
	}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricsPrefix + "calls_total",
		Help: "Tool calls that reached a terminal state in this worker, by outcome.",
	}, []string{"outcome"})
	for _, s := range callOutcomes {
		m.calls[s] = calls.WithLabelValues(string(s))
	}
	m.redispatches = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "redispatches_total",
		Help: "Calls sent a second time after an ambiguous failure their idempotency allowed.",
	})
	m.uncertain = prometheus.NewCounter(prometheus.CounterOpts{
		Name: metricsPrefix + "uncertain_calls_total",
		Help: "Calls that ended uncertain: they may have executed and are never sent again; an operator must reconcile them.",
	})
	m.commitLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    metricsPrefix + "commit_latency_seconds",
		Help:    "Time of each durable event-log commit, BEGIN to COMMIT returned (one commit may carry many appends).",
		Buckets: prometheus.ExponentialBuckets(0.00025, 2, 14), // 0.25 ms … 2 s
	})
	leaseLosses := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: metricsPrefix + "lease_losses_total",
		Help: "Run leases this worker lost (expired or taken over) while it held the run.",
	}, func() float64 { return float64(db.LeaseLosses()) })
	transient := prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: metricsPrefix + "db_transient_errors_total",
		Help: "Transient PostgreSQL errors this worker met (dropped connections, restarts, failovers, serialization failures), retried with backoff while the leases allowed.",
	}, func() float64 { return float64(db.TransientErrors()) })
	m.reg.MustRegister(claimed, m.finished, calls, m.redispatches, m.uncertain, m.commitLatency, leaseLosses, transient,
		queueDepth{db: db, desc: prometheus.NewDesc(metricsPrefix+"queue_depth", "Queued runs waiting for a worker, counted at each scrape.", nil, nil)},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// observeCommit is the DB's CommitObserver: it runs under the log's write
// lock, so it only adds to counters (a fact appended by this process
// decodes without parsing: Decode hands back the appended value; a frame
// is read only when its header carries a move).
func (m *workerMetrics) observeCommit(ci events.CommitInfo) {
	m.commitLatency.Observe(ci.Latency.Seconds())
	for _, evs := range ci.Appends {
		for _, e := range evs {
			switch e.Type {
			case vocab.TypeRunStarted:
				m.claimedQueued.Inc()
			case vocab.TypeRunResumed:
				m.claimedResumed.Inc()
			default:
				// A call's move rides on the fact that caused it (or, in
				// an older log, on call.transition).
				tr, ok, err := vocab.EventMove(e)
				if !ok || err != nil {
					continue
				}
				to := fsm.State(tr.To)
				if c := m.calls[to]; c != nil {
					c.Inc()
				}
				switch to {
				case fsm.Redispatched:
					m.redispatches.Inc()
				case fsm.Uncertain:
					m.uncertain.Inc()
				}
			}
		}
	}
}

// runFinished counts a run this worker let go of (not one another process
// took first).
func (m *workerMetrics) runFinished(r worker.Result) {
	if !r.Skipped {
		m.finished.WithLabelValues(r.State).Inc()
	}
}

// queueDepth collects agentctl_worker_queue_depth with one COUNT per
// scrape; when the database does not answer the metric is left out of
// that scrape (and /healthz says why) rather than failing the others.
type queueDepth struct {
	db   *events.DB
	desc *prometheus.Desc
}

func (q queueDepth) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q queueDepth) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), metricsQueryTimeout)
	defer cancel()
	n, err := projector.QueuedRuns(ctx, q.db)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(q.desc, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(n))
}

// handler serves /metrics and /healthz.
func (m *workerMetrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), metricsQueryTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := m.db.Ping(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			// Ping's error names the database without its password.
			fmt.Fprintf(w, "database unreachable: %s\n", clean(err.Error()))
			return
		}
		fmt.Fprintln(w, "ok")
	})
	return mux
}

// metricsListenAddr is where --metrics-addr addr listens: a bare ":PORT"
// (no host) binds loopback, 127.0.0.1:PORT, since the endpoints have no
// authentication; a host given explicitly is used as given, and warning,
// when not "", says that it is not a loopback address (only an IP literal
// that is loopback, or "localhost", counts as one: a name is not resolved).
func metricsListenAddr(addr string) (listen, warning string, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", "", err
	}
	if host == "" {
		return net.JoinHostPort("127.0.0.1", port), "", nil
	}
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		return addr, "", nil
	}
	return addr, fmt.Sprintf("--metrics-addr %s is not a loopback address: /metrics and /healthz, which have no authentication, are reachable from the network", addr), nil
}

// serveWorkerMetrics starts the metrics listener on addr for w (whose DB
// and Finished it hooks) and returns the function that stops it. An empty
// addr serves nothing; a bare ":PORT" binds loopback (metricsListenAddr).
// A bind failure is a usage error (exit 2) naming the address.
func (a *app) serveWorkerMetrics(addr string, w *worker.Worker) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	listen, warning, err := metricsListenAddr(addr)
	if err != nil {
		return nil, usageErr("--metrics-addr %s: %w", addr, err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, usageErr("--metrics-addr %s: %w", addr, err)
	}
	if warning != "" { // on stderr in every output mode: it is a log line, not data
		fmt.Fprintf(a.stderr, "worker: warning: %s\n", warning)
	}
	m := newWorkerMetrics(w.DB)
	w.DB.ObserveCommits(m.observeCommit)
	finished := w.Finished
	w.Finished = func(r worker.Result) {
		m.runFinished(r)
		if finished != nil {
			finished(r)
		}
	}
	srv := &http.Server{Handler: m.handler(), ReadHeaderTimeout: 5 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && a.output == "human" {
			fmt.Fprintf(a.stderr, "worker: metrics server: %s\n", clean(err.Error()))
		}
	}()
	if a.output == "human" {
		fmt.Fprintf(a.stderr, "worker: metrics on http://%s\n", ln.Addr())
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-served
		w.DB.ObserveCommits(nil)
	}, nil
}
