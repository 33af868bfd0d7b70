package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// countingTool is act counting its executions per argument n. While block
// is set, every execution from the (after+1)th on reports on entered and
// waits for release (or the request's end).
type countingTool struct {
	mu       sync.Mutex
	byArg    map[string]int
	total    int
	after    int
	entered  chan string
	release  chan struct{}
	blocking bool
}

func newCountingTool() *countingTool {
	return &countingTool{byArg: map[string]int{}, release: make(chan struct{})}
}

// blockAfter makes executions after the first n block until unblock.
func (c *countingTool) blockAfter(n, capacity int) {
	c.after, c.blocking, c.entered = n, true, make(chan string, capacity)
}

// unblock releases the blocked executions; later ones run through.
func (c *countingTool) unblock() {
	c.mu.Lock()
	c.blocking = false
	c.mu.Unlock()
	close(c.release)
}

func (c *countingTool) def() mcptest.ToolDef {
	d := actTool()
	d.Handler = func(ctx context.Context, call *mcptest.Call) (*mcptest.Result, error) {
		var a struct {
			N json.Number `json:"n"`
		}
		_ = json.Unmarshal(call.Arguments, &a)
		c.mu.Lock()
		c.byArg[a.N.String()]++
		c.total++
		block := c.blocking && c.total > c.after
		c.mu.Unlock()
		if block {
			c.entered <- a.N.String()
			select {
			case <-c.release:
			case <-ctx.Done():
			}
		}
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	return d
}

func (c *countingTool) counts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.byArg {
		out[k] = v
	}
	return out
}

// queueWorkflow writes a workflow of `tasks` sequential at_most_once calls
// of act with arguments {n: inputs.n}.
func queueWorkflow(t *testing.T, url string, tasks int) string {
	t.Helper()
	var s strings.Builder
	fmt.Fprintf(&s, `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: queued}
spec:
  inputs:
    n: {type: integer}
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    act: {kind: mcp.call, idempotency: at_most_once}
  tasks:
`, url)
	for i := 0; i < tasks; i++ {
		fmt.Fprintf(&s, "    - {id: t%d, uses: action:act, with: {server: local, tool: act, arguments: {n: \"${{ inputs.n }}\"}}}\n", i)
	}
	path := filepath.Join(t.TempDir(), "queued.yaml")
	if err := os.WriteFile(path, []byte(s.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// submitN queues n runs of wf with inputs n=0..n-1 and returns their ids.
func submitN(t *testing.T, db, wf string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		out, stderr, code := cli(t, "submit", wf, "--input", fmt.Sprintf("n=%d", i), "--db", db)
		if code != 0 {
			t.Fatalf("submit exit %d: %s", code, stderr)
		}
		ids[i] = strings.TrimSpace(out)
		if !strings.HasPrefix(ids[i], "run-") || strings.Contains(ids[i], "\n") {
			t.Fatalf("submit printed %q, want one run id", out)
		}
	}
	return ids
}

// runStates returns every run's state from `runs list --output json`.
func runStates(t *testing.T, db string) map[string]string {
	t.Helper()
	out, stderr, code := cli(t, "runs", "list", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("runs list exit %d: %s", code, stderr)
	}
	var env struct {
		Data []projector.RunSummary `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("runs list: %v\n%s", err, out)
	}
	states := map[string]string{}
	for _, r := range env.Data {
		states[r.RunID] = r.State
	}
	return states
}

// TestCLI_SubmitQueuesWithoutCalling: submit validates, records a queued
// run, prints its id and sends nothing; runs list shows it queued; a bad
// input is refused with exit 2 and records nothing.
func TestCLI_SubmitQueuesWithoutCalling(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		tool := newCountingTool()
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		wf := queueWorkflow(t, srv.URL, 1)
		ids := submitN(t, db, wf, 2)
		if st := srv.Stats(); st.Posts != 0 || st.Initialize != 0 {
			t.Fatalf("submit reached the server: %+v", st)
		}
		states := runStates(t, db)
		for _, id := range ids {
			if states[id] != "queued" {
				t.Fatalf("runs list: %s is %q, want queued (%v)", id, states[id], states)
			}
		}
		short := func(id string) string { return id[len(id)-8:] } // what human runs list prints
		if out, _, code := cli(t, "runs", "list", "--state", "queued", "--limit", "1", "--db", db); code != 0 || !strings.Contains(out, short(ids[1])) || strings.Contains(out, short(ids[0])) {
			t.Fatalf("runs list --state queued --limit 1: exit %d\n%s", code, out)
		}
		if got := describe(t, db, ids[0]); strings.Join(got, ",") != "run.created" {
			t.Fatalf("queued run's log = %v, want run.created alone", got)
		}
		if _, _, code := cli(t, "submit", wf, "--input", "n=not-a-number", "--db", db); code != 2 {
			t.Fatalf("submit with a bad input: exit %d, want 2", code)
		}
		if n := len(runIDs(t, db)); n != 2 {
			t.Fatalf("%d runs after a refused submit, want 2", n)
		}

		out, stderr, code := cli(t, "worker", "--drain", "--db", db, "--output", "json")
		if code != 0 {
			t.Fatalf("worker exit %d: %s", code, stderr)
		}
		var env struct {
			Kind string       `json:"kind"`
			Data workerResult `json:"data"`
		}
		if err := json.Unmarshal([]byte(out), &env); err != nil || env.Kind != "WorkerResult" || len(env.Data.Runs) != 2 {
			t.Fatalf("worker output (%v): %s", err, out)
		}
		for _, id := range ids {
			if got := describe(t, db, id); got[1] != "run.started" || got[len(got)-1] != "run.finished succeeded" {
				t.Fatalf("run %s: %v", id, got)
			}
			assertRebuildEqual(t, db, id)
		}
		if c := tool.counts(); c["0"] != 1 || c["1"] != 1 {
			t.Fatalf("executions per argument = %v, want one each", c)
		}
	})
}

// TestCLI_WorkerDrainsTheQueue: one `worker --drain` executes 20 queued
// runs, four at a time, each call exactly once, every chain verifying.
func TestCLI_WorkerDrainsTheQueue(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		tool := newCountingTool()
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		ids := submitN(t, db, queueWorkflow(t, srv.URL, 1), 20)
		out, err := subprocess(t, "worker", "--drain", "--concurrency", "4", "--db", db).CombinedOutput()
		if err != nil {
			t.Fatalf("worker: %v\n%s", err, out)
		}
		states := runStates(t, db)
		c := tool.counts()
		for i, id := range ids {
			if states[id] != "succeeded" {
				t.Errorf("run %s: %s", id, states[id])
			}
			if c[fmt.Sprint(i)] != 1 {
				t.Errorf("argument %d executed %d times", i, c[fmt.Sprint(i)])
			}
			if n, err := openLog(t, db).VerifyRun(context.Background(), id); err != nil || n < 3 {
				t.Errorf("run %s: chain %d, %v", id, n, err)
			}
		}
		if !strings.Contains(string(out), "queue drained, 20 run(s) taken") {
			t.Fatalf("worker output:\n%s", out)
		}
	})
}

// TestCLI_WorkerKilledThenAnotherFinishes: a worker draining 20 queued
// runs of an at_most_once call is killed (SIGKILL) while four calls are
// executing on the server; a second worker resumes the four orphans
// (dispatched, no outcome: uncertain, never sent again) and runs the rest.
// Every argument is executed exactly once, every chain verifies and
// rebuilds equal.
func TestCLI_WorkerKilledThenAnotherFinishes(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		const runs, conc, before = 20, 4, 8
		tool := newCountingTool()
		tool.blockAfter(before, conc)
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		ids := submitN(t, db, queueWorkflow(t, srv.URL, 1), runs)

		first := subprocess(t, "worker", "--drain", "--concurrency", fmt.Sprint(conc), "--db", db)
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		blocked := map[string]bool{}
		for len(blocked) < conc {
			select {
			case n := <-tool.entered:
				blocked[n] = true
			case <-time.After(60 * time.Second):
				_ = first.Process.Kill()
				t.Fatalf("only %d calls blocked (a failsafe, not a synchronisation)", len(blocked))
			}
		}
		if err := first.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.Wait()
		awaitDeadOwners(t, db) // on PostgreSQL its leases would run out
		tool.unblock()
		if c := tool.counts(); len(c) != before+conc {
			t.Fatalf("executions before the kill: %v", c)
		}
		midway := runStates(t, db)

		out, err := subprocess(t, "worker", "--drain", "--concurrency", fmt.Sprint(conc), "--db", db).CombinedOutput()
		if err != nil {
			t.Fatalf("second worker: %v\n%s", err, out)
		}
		states := runStates(t, db)
		c := tool.counts()
		uncertain := 0
		for i, id := range ids {
			arg := fmt.Sprint(i)
			if c[arg] != 1 {
				t.Errorf("argument %s executed %d times, want exactly once", arg, c[arg])
			}
			want := "succeeded"
			if blocked[arg] {
				want = "uncertain" // sent, no answer on disk: never sent again
				uncertain++
				if midway[id] != "interrupted" { // recorded running, no process holds it
					t.Errorf("run %s was %q after the kill, want interrupted", id, midway[id])
				}
			}
			if states[id] != want {
				t.Errorf("run %s (argument %s): %s, want %s", id, arg, states[id], want)
			}
			evs := logOf(t, db, id)
			if n, err := openLog(t, db).VerifyRun(context.Background(), id); err != nil || n != int64(len(evs)) {
				t.Errorf("run %s: chain %d of %d, %v", id, n, len(evs), err)
			}
			assertRebuildEqual(t, db, id)
		}
		if uncertain != conc || !strings.Contains(string(out), "resuming") {
			t.Fatalf("%d uncertain runs, want %d; second worker:\n%s", uncertain, conc, out)
		}
	})
}

// TestCLI_WorkerStopsCleanlyOnSIGTERM: a polling worker gets SIGTERM while
// two runs are each in their first call; the calls finish, the runs stop
// before their second task (no run.finished: resumable), the worker exits
// 0, and `worker --drain` then completes both, sending each call once.
func TestCLI_WorkerStopsCleanlyOnSIGTERM(t *testing.T) {
	testWorkerStopsCleanly(t, syscall.SIGTERM)
}

// TestCLI_WorkerStopsCleanlyOnSIGINT: the same for SIGINT (Ctrl-C at a
// terminal), which the worker treats as SIGTERM.
func TestCLI_WorkerStopsCleanlyOnSIGINT(t *testing.T) {
	testWorkerStopsCleanly(t, syscall.SIGINT)
}

func testWorkerStopsCleanly(t *testing.T, sig syscall.Signal) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		tool := newCountingTool()
		tool.blockAfter(0, 2)
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		ids := submitN(t, db, queueWorkflow(t, srv.URL, 2), 2)

		w := subprocess(t, "worker", "--concurrency", "2", "--poll", "20ms", "--db", db)
		stderr, err := w.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(stderr)
		for range 2 {
			select {
			case <-tool.entered:
			case <-time.After(60 * time.Second):
				_ = w.Process.Kill()
				t.Fatal("the runs' first calls never arrived (a failsafe, not a synchronisation)")
			}
		}
		if err := w.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		for lines.Scan() { // the calls are released once the worker says it is stopping
			fmt.Fprintln(&out, lines.Text())
			if strings.HasPrefix(lines.Text(), "worker: stopping") {
				break
			}
		}
		tool.unblock()
		rest, _ := io.ReadAll(stderr)
		out.Write(rest)
		if err := w.Wait(); err != nil {
			t.Fatalf("worker after %v: %v\n%s", sig, err, out.String())
		}
		if !strings.Contains(out.String(), "worker: stopped, 2 run(s) taken") {
			t.Fatalf("worker output:\n%s", out.String())
		}
		for _, id := range ids {
			lines := describe(t, db, id)
			if last := lines[len(lines)-1]; last != "task.finished t0 succeeded" {
				t.Fatalf("run %s after the stop ends with %q, want the first task finished and nothing after\n%s", id, last, strings.Join(lines, "\n"))
			}
		}
		// Recorded running, no worker holds them: shown interrupted until one takes them.
		if states := runStates(t, db); states[ids[0]] != "interrupted" || states[ids[1]] != "interrupted" {
			t.Fatalf("states after the stop: %v", states)
		}

		if o, err := subprocess(t, "worker", "--drain", "--db", db).CombinedOutput(); err != nil {
			t.Fatalf("second worker: %v\n%s", err, o)
		}
		states := runStates(t, db)
		c := tool.counts()
		for i, id := range ids {
			if states[id] != "succeeded" || c[fmt.Sprint(i)] != 2 {
				t.Errorf("run %s: %s, argument %d executed %d times; want succeeded, twice (one per task)", id, states[id], i, c[fmt.Sprint(i)])
			}
			assertRebuildEqual(t, db, id)
		}
	})
}

// TestCLI_WorkerGraceExpires: a call still executing when the grace period
// after SIGTERM ends is left as it is (exit 130, nothing recorded as
// cancelled); the next worker resumes the run and, the at_most_once call
// having no outcome on disk, ends it uncertain without sending it again.
func TestCLI_WorkerGraceExpires(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		tool := newCountingTool()
		tool.blockAfter(0, 1)
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		ids := submitN(t, db, queueWorkflow(t, srv.URL, 1), 1)
		w := subprocess(t, "worker", "--grace", "100ms", "--poll", "20ms", "--db", db)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-tool.entered:
		case <-time.After(60 * time.Second):
			_ = w.Process.Kill()
			t.Fatal("the call never arrived (a failsafe, not a synchronisation)")
		}
		if err := w.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		err := w.Wait()
		tool.unblock()
		if w.ProcessState.ExitCode() != 130 {
			t.Fatalf("worker after the grace period: %v, want exit 130", err)
		}
		if lines := describe(t, db, ids[0]); lines[len(lines)-1] != "mcp.request out tools/call prepared->dispatched" {
			t.Fatalf("run after the grace period:\n%s", strings.Join(lines, "\n"))
		}
		awaitDeadOwners(t, db) // left as a crash leaves them: on PostgreSQL, leased until expiry
		if o, err := subprocess(t, "worker", "--drain", "--db", db).CombinedOutput(); err != nil {
			t.Fatalf("second worker: %v\n%s", err, o)
		}
		if st := runStates(t, db)[ids[0]]; st != "uncertain" || tool.counts()["0"] != 1 {
			t.Fatalf("run %s, executed %d times; want uncertain, once", st, tool.counts()["0"])
		}
		assertRebuildEqual(t, db, ids[0])
	})
}

// TestCLI_WorkerCrashMatrix kills a worker right after each commit of the
// queued run it executes (the first, the call's intent, carries
// run.started) and lets a
// second worker take the run over: the log is a sound prefix-extension of
// what was committed, the run ends succeeded or uncertain, and the tool
// ran at most once (at_most_once) or twice (idempotent).
func TestCLI_WorkerCrashMatrix(t *testing.T) {
	t.Parallel()
	for _, idem := range []string{"at_most_once", "idempotent"} {
		t.Run(idem, func(t *testing.T) {
			t.Parallel()
			refSrv := mcptest.Start(t, mcptest.Options{}, actTool())
			refDB := filepath.Join(t.TempDir(), "ref.db")
			refID := submitN(t, refDB, actWorkflow(t, refSrv.URL, idem), 1)[0]
			if o, err := subprocess(t, "worker", "--drain", "--db", refDB).CombinedOutput(); err != nil {
				t.Fatalf("reference worker: %v\n%s", err, o)
			}
			evs := logOf(t, refDB, refID)
			var points []string // the last event of each commit after run.created
			lines := describeAll(evs)
			for i, e := range evs {
				if i > 0 && (i+1 == len(evs) || evs[i+1].CreatedAt != e.CreatedAt) {
					points = append(points, pointName(lines, i))
				}
			}
			// The call's intent, carrying run.started and the session's
			// handshake; its outcome with run.finished.
			if len(points) < 2 || lines[1] != "run.started" || !strings.HasPrefix(points[0], "mcp.request out tools/call") {
				t.Fatalf("crash points %v (events %v)", points, lines)
			}
			for _, point := range points[:len(points)-1] { // after the last, nothing is left to do
				t.Run(strings.NewReplacer(" ", "_", "#", "@").Replace(point), func(t *testing.T) {
					t.Parallel()
					srv := mcptest.Start(t, mcptest.Options{}, actTool())
					db := filepath.Join(t.TempDir(), "a.db")
					id := submitN(t, db, actWorkflow(t, srv.URL, idem), 1)[0]
					killedAt(t, point, "worker", "--drain", "--db", db)
					before := logOf(t, db, id)
					if o, err := subprocess(t, "worker", "--drain", "--db", db).CombinedOutput(); err != nil {
						t.Fatalf("second worker: %v\n%s", err, o)
					}
					after := assertSound(t, db, id, before)
					limit := 1
					if isRedispatchable(idem) {
						limit = 2
					}
					if n := srv.Stats().Executed["act"]; n > limit {
						t.Fatalf("%s tool executed %d times, at most %d allowed\n%s", idem, n, limit, strings.Join(describeAll(after), "\n"))
					}
					if st := runStates(t, db)[id]; st != "succeeded" && st != "uncertain" {
						t.Fatalf("run ended %s\n%s", st, strings.Join(describeAll(after), "\n"))
					}
				})
			}
		})
	}
}

// TestCLI_TwoWorkersDrainOneQueue: two `worker --drain` processes started
// together on one database share 30 queued runs: each run is taken by one
// worker, each argument executed exactly once, every chain verifies, and
// the runs the two workers report succeeded add up to the queue.
func TestCLI_TwoWorkersDrainOneQueue(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		const runs = 30
		tool := newCountingTool()
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		ids := submitN(t, db, queueWorkflow(t, srv.URL, 1), runs)
		var outs [2][]byte
		var errs [2]error
		var wg sync.WaitGroup
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outs[i], errs[i] = subprocess(t, "worker", "--drain", "--concurrency", "4", "--output", "jsonl", "--db", db).Output()
			}()
		}
		wg.Wait()
		taken := 0
		for i := range outs {
			if errs[i] != nil {
				t.Fatalf("worker %d: %v\n%s", i, errs[i], outs[i])
			}
			taken += strings.Count(string(outs[i]), `"state":"succeeded"`) // a run the other took is reported skipped
		}
		if taken != runs {
			t.Fatalf("the workers report %d runs, want %d:\n%s\n%s", taken, runs, outs[0], outs[1])
		}
		states := runStates(t, db)
		c := tool.counts()
		for i, id := range ids {
			if states[id] != "succeeded" || c[fmt.Sprint(i)] != 1 {
				t.Errorf("run %s: %s, argument %d executed %d times", id, states[id], i, c[fmt.Sprint(i)])
			}
			if _, err := openLog(t, db).VerifyRun(context.Background(), id); err != nil {
				t.Errorf("run %s: %v", id, err)
			}
		}
	})
}
