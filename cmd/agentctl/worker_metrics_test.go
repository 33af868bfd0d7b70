package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_WorkerMetrics: a polling `worker --metrics-addr 127.0.0.1:0`
// prints where it listens, executes 6 queued one-call runs, and its
// /metrics then say exactly that (6 claimed, 6 finished succeeded, 6
// calls succeeded, no redispatch, no uncertain call, an empty queue, one
// latency observation per commit at least); /healthz answers 200 "ok".
// On PostgreSQL the worker reaches its database through a TCP relay that
// is then cut: /healthz answers 503 naming the database without its
// password. SIGTERM then stops the worker with exit 0.
func TestCLI_WorkerMetrics(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		const runs = 6
		tool := newCountingTool()
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		submitN(t, db, queueWorkflow(t, srv.URL, 1), runs)
		workerDB := db
		var relay *tcpRelay
		if events.IsPostgres(db) {
			relay, workerDB = relayPostgres(t, db)
		}
		w, base := startMetricsWorker(t, "--concurrency", "4", "--db", workerDB)

		m := pollMetrics(t, base, func(m map[string]float64) bool {
			return m[`agentctl_worker_runs_finished_total{state="succeeded"}`] == runs
		})
		want := map[string]float64{
			`agentctl_worker_runs_claimed_total{resumed="false"}`:    runs,
			`agentctl_worker_runs_claimed_total{resumed="true"}`:     0,
			`agentctl_worker_runs_finished_total{state="succeeded"}`: runs,
			`agentctl_worker_runs_finished_total{state="failed"}`:    0,
			`agentctl_worker_calls_total{outcome="succeeded"}`:       runs,
			`agentctl_worker_calls_total{outcome="failed"}`:          0,
			`agentctl_worker_calls_total{outcome="uncertain"}`:       0,
			`agentctl_worker_calls_total{outcome="cancelled"}`:       0,
			`agentctl_worker_redispatches_total`:                     0,
			`agentctl_worker_uncertain_calls_total`:                  0,
			`agentctl_worker_lease_losses_total`:                     0,
			`agentctl_worker_queue_depth`:                            0,
		}
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}
		// Each run commits at least its claim, its call's intent and its
		// outcome with run.finished; group commit may share commits.
		if n := m[`agentctl_worker_commit_latency_seconds_count`]; n < runs || m[`agentctl_worker_commit_latency_seconds_sum`] <= 0 {
			t.Errorf("commit latency: count %v sum %v, want at least %d commits observed", n, m[`agentctl_worker_commit_latency_seconds_sum`], runs)
		}
		if c := tool.counts(); len(c) != runs {
			t.Errorf("server executions per argument = %v, want %d arguments once each", c, runs)
		}
		if code, body := get(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("/healthz = %d %q, want 200 ok", code, body)
		}

		if relay != nil {
			relay.Close() // the database is now unreachable from the worker
			code, body := pollHealthz(t, base, http.StatusServiceUnavailable)
			if !strings.Contains(body, "database unreachable: storage: ping postgres://") {
				t.Errorf("/healthz = %d %q, want the reason naming the database", code, body)
			}
			if u, _ := url.Parse(db); u != nil {
				if pw, ok := u.User.Password(); ok && strings.Contains(body, ":"+pw+"@") {
					t.Errorf("/healthz shows the database password: %q", body)
				}
			}
		}

		stopMetricsWorker(t, w)
	})
}

// TestCLI_WorkerMetricsFaults: a worker is killed while two at_most_once
// calls execute; an idempotent run whose first response is malformed is
// queued. A second worker's metrics then count exactly what happened: 2
// orphans resumed and ended uncertain (their calls never sent again), 1
// queued run started whose call was redispatched once and succeeded.
func TestCLI_WorkerMetricsFaults(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		tool := newCountingTool()
		tool.blockAfter(2, 2)
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		submitN(t, db, queueWorkflow(t, srv.URL, 1), 4)
		first := subprocess(t, "worker", "--drain", "--concurrency", "2", "--db", db)
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			select {
			case <-tool.entered:
			case <-time.After(60 * time.Second):
				_ = first.Process.Kill()
				t.Fatal("the blocked calls never arrived (a failsafe, not a synchronisation)")
			}
		}
		if err := first.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.Wait()
		awaitDeadOwners(t, db) // on PostgreSQL its leases would run out
		tool.unblock()
		srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Nth: 1, Body: []byte(`{"jsonrpc":"2.0",`)})
		idem := testkit.Workflow{URL: srv.URL, Tasks: []testkit.Task{{ID: "only", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 99}"}}}.WriteFile(t)
		if _, stderr, code := cli(t, "submit", idem, "--db", db); code != 0 {
			t.Fatalf("submit: exit %d\n%s", code, stderr)
		}

		w, base := startMetricsWorker(t, "--concurrency", "4", "--db", db)
		m := pollMetrics(t, base, func(m map[string]float64) bool {
			return m[`agentctl_worker_runs_finished_total{state="uncertain"}`]+m[`agentctl_worker_runs_finished_total{state="succeeded"}`] == 3
		})
		want := map[string]float64{
			`agentctl_worker_runs_claimed_total{resumed="false"}`:    1,
			`agentctl_worker_runs_claimed_total{resumed="true"}`:     2,
			`agentctl_worker_runs_finished_total{state="succeeded"}`: 1,
			`agentctl_worker_runs_finished_total{state="uncertain"}`: 2,
			`agentctl_worker_calls_total{outcome="succeeded"}`:       1,
			`agentctl_worker_calls_total{outcome="uncertain"}`:       2,
			`agentctl_worker_calls_total{outcome="failed"}`:          0,
			`agentctl_worker_redispatches_total`:                     1,
			`agentctl_worker_uncertain_calls_total`:                  2,
			`agentctl_worker_queue_depth`:                            0,
		}
		for k, v := range want {
			if got, ok := m[k]; !ok || got != v {
				t.Errorf("%s = %v (present %v), want %v", k, got, ok, v)
			}
		}
		// Each at_most_once call executed once; the idempotent one twice
		// (the malformed answer, then the redispatch).
		if c := tool.counts(); len(c) != 5 || c["0"] != 1 || c["1"] != 1 || c["2"] != 1 || c["3"] != 1 || c["99"] != 2 {
			t.Errorf("executions per argument = %v, want 0-3 once each and 99 twice", c)
		}
		stopMetricsWorker(t, w)
	})
}

// startMetricsWorker starts a polling `worker --metrics-addr 127.0.0.1:0`
// with args and returns it and the base URL it printed. With --poll 1h the
// worker looks at the queue when it starts and when a run ends, never on
// a timer during a test.
func startMetricsWorker(t *testing.T, args ...string) (*exec.Cmd, string) {
	t.Helper()
	w := subprocess(t, append([]string{"worker", "--metrics-addr", "127.0.0.1:0", "--poll", "1h"}, args...)...)
	stderr, err := w.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if w.ProcessState == nil {
			_ = w.Process.Kill()
			_ = w.Wait()
		}
	})
	return w, metricsURL(t, stderr)
}

// stopMetricsWorker sends SIGTERM and expects exit 0.
func stopMetricsWorker(t *testing.T, w *exec.Cmd) {
	t.Helper()
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w.Wait(); err != nil {
		t.Fatalf("worker after SIGTERM: %v", err)
	}
}

// TestCLI_WorkerMetricsBindFailure: an address already in use is a usage
// error (exit 2) naming the address, before any run is taken.
func TestCLI_WorkerMetricsBindFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	tool := newCountingTool()
	srv := mcptest.Start(t, mcptest.Options{}, tool.def())
	db := testkit.Backends(t)[0].DSN(t)
	ids := submitN(t, db, queueWorkflow(t, srv.URL, 1), 1)
	_, stderr, code := cli(t, "worker", "--drain", "--metrics-addr", ln.Addr().String(), "--db", db)
	if code != 2 || !strings.Contains(stderr, "--metrics-addr "+ln.Addr().String()) {
		t.Fatalf("worker on a busy address: exit %d, want 2 naming it\n%s", code, stderr)
	}
	if st := runStates(t, db); st[ids[0]] != "queued" || len(tool.counts()) != 0 {
		t.Fatalf("the refused worker took a run: %v, calls %v", st, tool.counts())
	}
}

// metricsURL reads the worker's stderr up to its "metrics on" line and
// returns the URL it names; the rest of stderr is discarded.
func metricsURL(t *testing.T, stderr io.Reader) string {
	t.Helper()
	var seen strings.Builder
	r := bufio.NewReader(stderr)
	for {
		line, err := r.ReadString('\n')
		seen.WriteString(line)
		if u, ok := strings.CutPrefix(strings.TrimSpace(line), "worker: metrics on "); ok {
			go func() { _, _ = io.Copy(io.Discard, r) }() // keep the pipe flowing
			return u
		}
		if err != nil {
			t.Fatalf("worker ended without naming its metrics address: %v\n%s", err, seen.String())
		}
	}
}

// get fetches url and returns the status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// scrape fetches base/metrics and returns every sample by its series
// (name and labels as printed, e.g. `x_total{state="ok"}`).
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics = %d\n%s", code, body)
	}
	out := map[string]float64{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if i < 0 || err != nil {
			t.Fatalf("/metrics: unparsable line %q", line)
		}
		out[line[:i]] = v
	}
	return out
}

// pollMetrics scrapes until done holds, with a deadline (a failsafe: the
// condition is what the test waits for, not a time).
func pollMetrics(t *testing.T, base string, done func(map[string]float64) bool) map[string]float64 {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m := scrape(t, base)
		if done(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("metrics never reached the expected values:\n%v", m)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// pollHealthz fetches /healthz until it answers want, with a deadline.
func pollHealthz(t *testing.T, base string, want int) (int, string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, body := get(t, base+"/healthz")
		if code == want {
			return code, body
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz = %d %q, never %d", code, body, want)
		}
		time.Sleep(20 * time.Millisecond) // polling interval, not a synchronisation
	}
}

// tcpRelay forwards connections from a loopback port to one address until
// Close, which also cuts every forwarded connection: a database that
// becomes unreachable.
type tcpRelay struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// relayPostgres starts a relay to dsn's server and returns it with dsn
// rewritten to go through it.
func relayPostgres(t *testing.T, dsn string) (*tcpRelay, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &tcpRelay{ln: ln, target: u.Host}
	t.Cleanup(r.Close)
	go r.serve()
	u.Host = ln.Addr().String()
	return r, u.String()
}

func (r *tcpRelay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		d, err := net.Dial("tcp", r.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			_, _ = c.Close(), d.Close()
			return
		}
		r.conns = append(r.conns, c, d)
		r.mu.Unlock()
		go func() { _, _ = io.Copy(d, c); _ = d.Close() }()
		go func() { _, _ = io.Copy(c, d); _ = c.Close() }()
	}
}

// Close stops accepting and cuts every relayed connection.
func (r *tcpRelay) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	_ = r.ln.Close()
	for _, c := range r.conns {
		_ = c.Close()
	}
}

// TestCLI_WorkerMetricsLoopbackDefault: a bare --metrics-addr :PORT
// listens on loopback only (the endpoints have no authentication), with
// no warning.
func TestCLI_WorkerMetricsLoopbackDefault(t *testing.T) {
	db := t.TempDir() + "/a.db"
	_, stderr, code := cli(t, "worker", "--drain", "--metrics-addr", ":0", "--db", db)
	if code != 0 || !strings.Contains(stderr, "worker: metrics on http://127.0.0.1:") || strings.Contains(stderr, "warning") {
		t.Fatalf("worker --metrics-addr :0: exit %d, want metrics on 127.0.0.1 without a warning\n%s", code, stderr)
	}
}

// TestMetricsListenAddr: where --metrics-addr listens, and which addresses
// draw the not-loopback warning (decided without binding anything).
func TestMetricsListenAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, listen string
		warn         bool
	}{
		{":9464", "127.0.0.1:9464", false},
		{":0", "127.0.0.1:0", false},
		{"127.0.0.1:9464", "127.0.0.1:9464", false},
		{"127.0.0.2:9464", "127.0.0.2:9464", false},
		{"[::1]:9464", "[::1]:9464", false},
		{"localhost:9464", "localhost:9464", false},
		{"0.0.0.0:9464", "0.0.0.0:9464", true},
		{"[::]:9464", "[::]:9464", true},
		{"192.0.2.7:9464", "192.0.2.7:9464", true},
		{"metrics.example:9464", "metrics.example:9464", true},
	} {
		listen, warning, err := metricsListenAddr(tc.addr)
		if err != nil || listen != tc.listen || (warning != "") != tc.warn {
			t.Errorf("metricsListenAddr(%q) = %q, %q, %v; want %q, warning %v", tc.addr, listen, warning, err, tc.listen, tc.warn)
		}
		if tc.warn && !strings.Contains(warning, tc.addr) {
			t.Errorf("warning %q does not name %s", warning, tc.addr)
		}
	}
	if _, _, err := metricsListenAddr("9464"); err == nil {
		t.Error("metricsListenAddr(\"9464\"): no error for an address without a port")
	}
}
