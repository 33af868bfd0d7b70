package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// fleetTool is act sleeping a random 0-300 ms and counting its executions
// per argument n, on the server's side.
type fleetTool struct {
	mu    sync.Mutex
	byArg map[string]int
}

func (f *fleetTool) def() mcptest.ToolDef {
	d := actTool()
	d.Handler = func(ctx context.Context, call *mcptest.Call) (*mcptest.Result, error) {
		var a struct {
			N json.Number `json:"n"`
		}
		_ = json.Unmarshal(call.Arguments, &a)
		f.mu.Lock()
		f.byArg[a.N.String()]++
		f.mu.Unlock()
		select {
		case <-time.After(time.Duration(rand.IntN(301)) * time.Millisecond):
		case <-ctx.Done():
		}
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	return d
}

// lockedBuffer collects a worker's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// fleetAudit records, for every event appended, the session that wrote
// it (application_name: which worker) and the run's lease at that moment,
// in the appending transaction: a fenced append leaves no row.
const fleetAudit = `
CREATE TABLE fleet_audit (run_id TEXT, seq BIGINT, app TEXT, owner TEXT, epoch BIGINT);
CREATE FUNCTION fleet_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO fleet_audit
        SELECT NEW.run_id, NEW.seq, current_setting('application_name'), l.owner, l.lease_epoch
        FROM (SELECT NEW.run_id AS run_id) x LEFT JOIN run_leases l ON l.run_id = x.run_id;
    RETURN NEW;
END $$;
CREATE TRIGGER fleet_audit AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION fleet_audit();`

// TestCLI_FleetOnPostgres (issue 15 item 6): three `worker --concurrency 8
// --lease 2s` processes drain 60 queued runs, each one at_most_once call
// with its own argument, on one PostgreSQL database. When a third of the
// runs have finished one worker is killed (SIGKILL: its session ends, its
// runs are taken over at once); another is stopped (SIGSTOP) while it
// holds leases, until the database shows them expired and one of its runs
// claimed again, then continued. Every run ends succeeded or uncertain;
// the server executed no argument twice; every event was written by the
// holder of the run's current lease, and no (run, epoch) by two workers;
// every chain verifies and rebuilds equal; the revived worker's late
// appends were refused (it reports the lease lost).
func TestCLI_FleetOnPostgres(t *testing.T) {
	const runs, workers = 60, 3
	dsn := testkit.PostgresDB(t)
	db := openLog(t, dsn)
	x := db.SQL()
	if _, err := x.Exec(fleetAudit); err != nil {
		t.Fatalf("audit trigger: %v", err)
	}
	tool := &fleetTool{byArg: map[string]int{}}
	srv := mcptest.Start(t, mcptest.Options{}, tool.def())
	wf, err := spec.Load(queueWorkflow(t, srv.URL, 1))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, runs)
	for i := range ids {
		// The library's submit: 60 CLI processes' start-up is not what
		// this test is about.
		if ids[i], err = (&workflow.Runner{DB: db}).Submit(context.Background(), wf, map[string]any{"n": i}, workflow.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	procs := make([]*exec.Cmd, workers)
	outs := make([]*lockedBuffer, workers)
	for i := range procs {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("application_name", fmt.Sprintf("w%d", i))
		u.RawQuery = q.Encode()
		outs[i] = &lockedBuffer{}
		procs[i] = subprocess(t, "worker", "--concurrency", "8", "--lease", "2s", "--poll", "50ms", "--db", u.String())
		procs[i].Stdout, procs[i].Stderr = outs[i], outs[i]
		if err := procs[i].Start(); err != nil {
			t.Fatal(err)
		}
		p := procs[i]
		t.Cleanup(func() {
			_ = p.Process.Signal(syscall.SIGCONT)
			_ = p.Process.Kill()
			_ = p.Wait()
		})
	}
	pidOf := map[string]int{}
	for i, p := range procs {
		pidOf[fmt.Sprintf("w%d", i)] = p.Process.Pid
	}
	ownedBy := func(owner string, pid int) bool { return strings.Contains(owner, fmt.Sprintf("/%d/", pid)) }

	// waitFor polls the database (never the clock) until cond holds; the
	// deadline is a failsafe.
	deadline := time.Now().Add(3 * time.Minute) // generous: a loaded CI machine drains slowly
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			if time.Now().After(deadline) {
				for i, o := range outs {
					t.Logf("worker w%d:\n%s", i, o.String())
				}
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond) // a poll interval, not a synchronisation
		}
	}
	finished := func() int {
		var n int
		if err := x.Get(&n, `SELECT count(*) FROM runs WHERE state IN ('succeeded', 'failed', 'uncertain', 'cancelled')`); err != nil {
			t.Fatal(err)
		}
		return n
	}
	type held struct {
		RunID string `db:"run_id"`
		Owner string `db:"owner"`
		Epoch int64  `db:"lease_epoch"`
	}
	leasesOf := func(pid int) []held {
		var all, out []held
		if err := x.Select(&all, `SELECT l.run_id, l.owner, l.lease_epoch FROM run_leases l JOIN runs r ON r.run_id = l.run_id
			WHERE l.owner IS NOT NULL AND r.state IN ('queued', 'running')`); err != nil {
			t.Fatal(err)
		}
		for _, h := range all {
			if ownedBy(h.Owner, pid) {
				out = append(out, h)
			}
		}
		return out
	}

	// A third done: `runs list` shows who holds the runs in flight, then
	// w0 dies.
	waitFor("a third of the runs finished", func() bool { return finished() >= runs/3 })
	out, stderr, code := cli(t, "runs", "list", "--db", dsn, "--output", "json")
	if code != 0 {
		t.Fatalf("runs list: exit %d: %s", code, stderr)
	}
	var list struct {
		Data []runListItem `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	// (A run listed running may show no lease: it finished and gave the
	// lease back between the two reads of runs list.)
	leased := 0
	for _, r := range list.Data {
		if r.Owner == nil || r.LeaseExpiresAt == nil {
			continue
		}
		leased++
		if !ownedBy(*r.Owner, pidOf["w0"]) && !ownedBy(*r.Owner, pidOf["w1"]) && !ownedBy(*r.Owner, pidOf["w2"]) {
			t.Errorf("runs list: run %s leased by %q, not a worker", r.RunID, *r.Owner)
		}
		if _, err := time.Parse(time.RFC3339Nano, *r.LeaseExpiresAt); err != nil {
			t.Errorf("runs list: run %s leaseExpiresAt %q: %v", r.RunID, *r.LeaseExpiresAt, err)
		}
	}
	if leased == 0 {
		t.Fatalf("runs list shows no lease while runs are in flight:\n%s", out)
	}
	if err := procs[0].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	// w1 is paused while it holds leases, until they expire and another
	// worker claims one of its runs (its epoch goes up), then continued.
	// The pause must fall between two of its transactions: one left open
	// would hold the row locks a takeover needs until the server's
	// idle_in_transaction_session_timeout (a lease's life) ends it, which
	// is another test's matter.
	w1 := pidOf["w1"]
	var stopped []held
	waitFor("w1 paused outside a transaction, holding a lease", func() bool {
		if len(leasesOf(w1)) == 0 {
			return false
		}
		if err := procs[1].Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		var busy int
		for {
			var active int
			if err := x.QueryRow(`SELECT count(*) FILTER (WHERE state = 'active'), count(*) FILTER (WHERE state LIKE 'idle in transaction%')
				FROM pg_stat_activity WHERE application_name = 'w1'`).Scan(&active, &busy); err != nil {
				t.Fatal(err)
			}
			if active == 0 { // a statement w1 sent before the stop has ended
				break
			}
		}
		if stopped = leasesOf(w1); busy > 0 || len(stopped) == 0 {
			_ = procs[1].Process.Signal(syscall.SIGCONT)
			return false
		}
		return true
	})
	// A run taken over may also be finished by its new owner between two
	// polls, which deletes its lease row; its log has then grown since w1
	// stopped, which w1 cannot have done.
	lastSeq := func(runID string) int64 {
		var n int64
		if err := x.Get(&n, `SELECT coalesce(max(seq), 0) FROM events WHERE run_id = $1`, runID); err != nil {
			t.Fatal(err)
		}
		return n
	}
	seqAtStop := map[string]int64{}
	for _, s := range stopped {
		seqAtStop[s.RunID] = lastSeq(s.RunID)
	}
	waitFor("one of w1's runs taken over", func() bool {
		for _, s := range stopped {
			var epoch int64
			var owner *string
			err := x.QueryRow(`SELECT lease_epoch, owner FROM run_leases WHERE run_id = $1`, s.RunID).Scan(&epoch, &owner)
			if errors.Is(err, sql.ErrNoRows) {
				if lastSeq(s.RunID) > seqAtStop[s.RunID] {
					return true
				}
				t.Fatalf("run %s: its lease row is gone while w1, its holder, is stopped, and its log has not grown", s.RunID)
			}
			if err != nil {
				t.Fatal(err)
			}
			if epoch > s.Epoch {
				return true
			}
		}
		return false
	})
	if err := procs[1].Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// Revived, w1 finds the run gone at its next append (or heartbeat, or
	// adoption of a claim) and says so; it writes nothing more to it.
	waitFor("w1 reporting a lost lease", func() bool { return strings.Contains(outs[1].String(), "lease lost at epoch") })

	waitFor("every run finished", func() bool { return finished() == runs })
	for _, i := range []int{1, 2} {
		if err := procs[i].Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := procs[i].Wait(); err != nil {
			t.Errorf("worker w%d after SIGTERM: %v\n%s", i, err, outs[i].String())
		}
	}
	_ = procs[0].Wait()

	// The outcome.
	states := runStates(t, dsn)
	tool.mu.Lock()
	counts := maps.Clone(tool.byArg)
	tool.mu.Unlock()
	tally := map[string]int{}
	for i, id := range ids {
		st := states[id]
		tally[st]++
		if st != "succeeded" && st != "uncertain" {
			t.Errorf("run %s: %s; want succeeded or uncertain", id, st)
		}
		if n := counts[fmt.Sprint(i)]; n > 1 || (st == "succeeded" && n != 1) {
			t.Errorf("run %s (%s): argument %d executed %d times", id, st, i, n)
		}
		if n, err := db.VerifyRun(context.Background(), id); err != nil || n < 3 {
			t.Errorf("run %s: chain %d, %v", id, n, err)
		}
		assertRebuildEqual(t, dsn, id)
	}

	// Every event a worker wrote was written under the run's current
	// lease, held by that worker; no (run, epoch) has two writers.
	var audit []struct {
		RunID string  `db:"run_id"`
		Seq   int64   `db:"seq"`
		App   string  `db:"app"`
		Owner *string `db:"owner"`
		Epoch *int64  `db:"epoch"`
	}
	if err := x.Select(&audit, `SELECT run_id, seq, app, owner, epoch FROM fleet_audit ORDER BY run_id, seq`); err != nil {
		t.Fatal(err)
	}
	writers := map[string]string{}
	for _, a := range audit {
		pid, worker := pidOf[a.App]
		if !worker {
			continue // submit's run.created
		}
		if a.Owner == nil || a.Epoch == nil || !ownedBy(*a.Owner, pid) {
			t.Errorf("run %s seq %d written by %s (pid %d) under lease %v/%v", a.RunID, a.Seq, a.App, pid, a.Owner, a.Epoch)
			continue
		}
		key := fmt.Sprintf("%s@%d", a.RunID, *a.Epoch)
		if w, ok := writers[key]; ok && w != a.App {
			t.Errorf("run %s epoch %d written by %s and %s", a.RunID, *a.Epoch, w, a.App)
		}
		writers[key] = a.App
	}

	// The revived worker counted what it lost.
	m := regexp.MustCompile(`worker: stopped, \d+ run\(s\) taken, (\d+) lease\(s\) lost`).FindStringSubmatch(outs[1].String())
	if m == nil || m[1] == "0" {
		t.Errorf("the revived worker's summary counts no lost lease:\n%s", outs[1].String())
	}
	t.Logf("runs: %v; (run, epoch) writers: %d; w1 held %d run(s) when stopped", tally, len(writers), len(stopped))
	if t.Failed() {
		for i, o := range outs {
			t.Logf("worker w%d:\n%s", i, o.String())
		}
	}
}

// TestCLI_WorkerLeasesOnPostgres: while a worker's two runs are each in
// their first call, `runs list` names the worker (host/pid/…) as their
// lease owner with time left; on SIGTERM the runs stop before their next
// task and the worker releases both leases (no owner, no expiry) before it
// exits, so another worker takes them at once.
func TestCLI_WorkerLeasesOnPostgres(t *testing.T) {
	dsn := testkit.PostgresDB(t)
	tool := newCountingTool()
	tool.blockAfter(0, 2)
	srv := mcptest.Start(t, mcptest.Options{}, tool.def())
	ids := submitN(t, dsn, queueWorkflow(t, srv.URL, 2), 2)
	w := subprocess(t, "worker", "--concurrency", "2", "--poll", "20ms", "--lease", "10s", "--db", dsn)
	out := &lockedBuffer{}
	w.Stdout, w.Stderr = out, out
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Process.Kill(); _ = w.Wait() })
	for range 2 {
		select {
		case <-tool.entered:
		case <-time.After(60 * time.Second):
			t.Fatalf("the runs' first calls never arrived (a failsafe, not a synchronisation)\n%s", out.String())
		}
	}
	owner := fmt.Sprintf("/%d/", w.Process.Pid)
	list, stderr, code := cli(t, "runs", "list", "--db", dsn)
	if code != 0 {
		t.Fatalf("runs list: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if !strings.Contains(lines[0], "OWNER") || !strings.Contains(lines[0], "LEASE") || len(lines) != 3 {
		t.Fatalf("runs list on PostgreSQL:\n%s", list)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, "running") || !strings.Contains(l, owner) || !strings.HasSuffix(l, " left") {
			t.Fatalf("runs list line %q: want running, owner %s…, time left", l, owner)
		}
	}
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	failsafe := time.After(60 * time.Second)
	poll := time.NewTicker(20 * time.Millisecond) // reads the worker's output
	defer poll.Stop()
	for !strings.Contains(out.String(), "worker: stopping") {
		select {
		case <-poll.C:
		case <-failsafe:
			t.Fatalf("the worker never said it was stopping\n%s", out.String())
		}
	}
	tool.unblock()
	if err := w.Wait(); err != nil {
		t.Fatalf("worker after SIGTERM: %v\n%s", err, out.String())
	}
	db := openLog(t, dsn)
	for _, id := range ids {
		var owner, expires *string
		var epoch int64
		if err := db.SQL().QueryRow(`SELECT owner, lease_expires_at::text, lease_epoch FROM run_leases WHERE run_id = $1`, id).Scan(&owner, &expires, &epoch); err != nil {
			t.Fatal(err)
		}
		if owner != nil || expires != nil || epoch != 1 {
			t.Fatalf("run %s after SIGTERM: lease owner %v, expiry %v, epoch %d; want released at epoch 1", id, owner, expires, epoch)
		}
	}
	// Recorded running, leases released: shown interrupted until a worker takes them.
	if states := runStates(t, dsn); states[ids[0]] != "interrupted" || states[ids[1]] != "interrupted" {
		t.Fatalf("states after the stop: %v", states)
	}
}
