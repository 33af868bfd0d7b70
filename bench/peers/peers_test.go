package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkflowYAML holds the agentctl workflows the benchmark writes to
// what it claims: n echo tasks, in file order or all independent with the
// concurrency asked for, each an at_most_once call on one loopback remote.
// (Setup also runs `agentctl check` on every file it writes.)
func TestWorkflowYAML(t *testing.T) {
	for _, tc := range []struct{ n, conc int }{{1, 0}, {5, 0}, {16, 8}} {
		y := workflowYAML("http://127.0.0.1:1/mcp", tc.n, tc.conc)
		tasks := strings.Count(y, "uses: action:echo")
		independent := strings.Count(y, "needs: []")
		if tasks != tc.n {
			t.Errorf("n=%d conc=%d: %d tasks\n%s", tc.n, tc.conc, tasks, y)
		}
		if want := map[bool]int{true: tc.n, false: 0}[tc.conc > 0]; independent != want {
			t.Errorf("n=%d conc=%d: %d tasks with needs: [], want %d", tc.n, tc.conc, independent, want)
		}
		if got := strings.Contains(y, fmt.Sprintf("concurrency: %d\n", tc.conc)); got != (tc.conc > 0) {
			t.Errorf("n=%d conc=%d: concurrency line present %v", tc.n, tc.conc, got)
		}
		for _, want := range []string{"idempotency: at_most_once", `url: "http://127.0.0.1:1/mcp"`, "networkAllowlist: [127.0.0.1]", fmt.Sprintf("message: %q", echoMessage)} {
			if !strings.Contains(y, want) {
				t.Errorf("n=%d conc=%d: no %q in\n%s", tc.n, tc.conc, want, y)
			}
		}
	}
}

// TestMedian: odd and even counts, unsorted input left as it was.
func TestMedian(t *testing.T) {
	xs := []float64{5, 1, 3}
	if got := median(xs); got != 3 {
		t.Errorf("median(5 1 3) = %v", got)
	}
	if xs[0] != 5 {
		t.Errorf("median sorted its argument: %v", xs)
	}
	if got := median([]float64{4, 1, 2, 3}); got != 2.5 {
		t.Errorf("median(4 1 2 3) = %v", got)
	}
	if got := median(nil); got != 0 {
		t.Errorf("median() = %v", got)
	}
}

// TestRotate: every system comes first in one round of len(systems).
func TestRotate(t *testing.T) {
	allSystems := systems(config{sqlite: true})
	first := map[string]bool{}
	for r := range len(allSystems) {
		got := rotate(allSystems, r)
		if len(got) != len(allSystems) {
			t.Fatalf("rotate %d: %v", r, got)
		}
		first[got[0]] = true
	}
	if len(first) != len(allSystems) {
		t.Errorf("first systems over a cycle: %v", first)
	}
}

// TestParallel: every index once, at most k at once, the first error
// returned and the rest not started.
func TestParallel(t *testing.T) {
	var seen [100]atomic.Int32
	var now, peak atomic.Int32
	err := parallel(100, 8, func(i int) error {
		if n := now.Add(1); n > peak.Load() {
			peak.Store(n)
		}
		seen[i].Add(1)
		now.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range seen {
		if seen[i].Load() != 1 {
			t.Fatalf("index %d ran %d times", i, seen[i].Load())
		}
	}
	if peak.Load() > 8 {
		t.Errorf("%d at once, want ≤ 8", peak.Load())
	}
	var calls atomic.Int32
	boom := errors.New("boom")
	if err := parallel(1000, 1, func(i int) error {
		calls.Add(1)
		if i == 3 {
			return boom
		}
		return nil
	}); !errors.Is(err, boom) || calls.Load() != 4 {
		t.Errorf("err %v after %d calls, want boom after 4", err, calls.Load())
	}
}

// TestLoopbackOnly: the benchmark refuses a cluster that is not on this
// machine.
func TestLoopbackOnly(t *testing.T) {
	for _, h := range []string{"127.0.0.1", "localhost", "::1", "/var/run/postgresql", ""} {
		if err := loopbackOnly(h); err != nil {
			t.Errorf("%q: %v", h, err)
		}
	}
	for _, h := range []string{"10.0.0.1", "db.internal", "192.168.1.2"} {
		if err := loopbackOnly(h); err == nil || !strings.Contains(err.Error(), h) {
			t.Errorf("%q: %v, want a refusal naming it", h, err)
		}
	}
}

// TestSetupRefusals: setup refuses a cluster off this machine or a URL
// that is not PostgreSQL's, with an error naming it, before it starts or
// creates anything (and cleans up without a panic).
func TestSetupRefusals(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:p@10.1.2.3:5432/db": `host "10.1.2.3" is not a loopback address`,
		"mysql://127.0.0.1/db":            "not a postgres:// URL",
	} {
		e, err := setup(context.Background(), config{dsn: dsn, database: "agentctl_peers", agentctl: "agentctl", producer: "producer"})
		if e != nil || err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: env %v, err %v; want %q", dsn, e, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "p@") {
			t.Errorf("%s: the error shows the password: %v", dsn, err)
		}
	}
}

// TestSystemsFor: the queued systems are measured on the many-runs shapes
// only, every other system on every shape.
func TestSystemsFor(t *testing.T) {
	cfg := config{sqlite: true, seqCalls: 1, concCalls: 1, runs: 1, concRuns: 1, inFlight: 1}
	for _, sh := range shapes(cfg) {
		got := systemsFor(cfg, sh)
		queued := 0
		for _, sys := range got {
			if queuedSystem(sys) {
				queued++
			}
		}
		if want := map[bool]int{true: 4, false: 0}[sh.oneCall]; queued != want {
			t.Errorf("%s: %d queued systems, want %d: %v", sh.name, queued, want, got)
		}
		if len(got)-queued != len(systems(cfg))-4 {
			t.Errorf("%s: %v, want every direct system", sh.name, got)
		}
	}
}

// TestReportRows: the summary and SQLite tables give the many-runs shapes
// a direct row (run --inputs, against dbos.RunWorkflow) and a queued row,
// each with its own ratio, and the one-run shapes one row.
func TestReportRows(t *testing.T) {
	cfg := config{sqlite: true, seqCalls: 10, concCalls: 16, runs: 10, concRuns: 16, inFlight: 8}
	res := &results{rounds: 1, samples: map[string][]sample{}}
	for _, sh := range shapes(cfg) {
		for _, sys := range systemsFor(cfg, sh) {
			wall := 10 * time.Millisecond
			if queuedSystem(sys) {
				wall = 20 * time.Millisecond // half as fast
			}
			res.add(sh.name, sys, sample{Wall: wall * time.Duration(sh.calls), Calls: sh.calls, Runs: 1, Rows: -1})
		}
	}
	var b strings.Builder
	report(&b, cfg, res)
	out := b.String()
	for _, want := range []string{
		"| 10 one-call runs / workflows, one process, ms per call | 10.00 | 10.00 / 10.00 | 10.00 | 1.00 / 1.00 | 10.00 (1.00 / 1.00) |",
		"| 10 one-call runs / workflows, one process, agentctl queued: submit + worker --drain, ms per call | 10.00 | 10.00 / 10.00 | 20.00 | 0.50 / 0.50 | 20.00 (0.50 / 0.50) |",
		"| 16 one-call runs / workflows, 8 in flight, agentctl queued: submit + worker --drain, calls/s | 100 | 100 / 100 | 50 | 0.50 / 0.50 | 50 (0.50 / 0.50) |",
		"| 10 one-call runs / workflows, one process, agentctl queued: submit + worker --drain, ms per call | 10.00 / 10.00 | 20.00 | 0.50 / 0.50 | 20.00 (0.50 / 0.50) |",
		"equivalent of DBOS's `dbos.RunWorkflow`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "one run / workflow of 10 sequential calls, ms per call"); n != 2 {
		t.Errorf("the one-run shape has %d summary rows, want 2 (PostgreSQL, SQLite):\n%s", n, out)
	}
}
