package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// BenchmarkWorkerFleet (issue 15): fleetRuns one-call runs (one
// at_most_once call of an mcptest tool on 127.0.0.1) queued on the
// PostgreSQL test server (AGENTCTL_TEST_POSTGRES; skipped without it
// outside CI) and drained by 1, 2 and 4 `agentctl worker --drain
// --concurrency 8` processes at once, each count on a fresh schema, in
// every round; submitting is not timed. In the same round it measures the
// physical floor: single-row INSERT commits (autocommit, no agentctl
// code) on that server from one connection and from 8 at once.
//
// It reports calls/s per fleet size, the ratio of 4 workers to one
// (target ≥ 2.5), the INSERT commit rates, and what was busy while the 4
// workers ran: the workers' CPU (getrusage of the children), the
// PostgreSQL server's CPU (/proc) and this process's (the MCP server),
// each in cores (CPU seconds per wall second; this machine has 2), and
// the machine's busy fraction (/proc/stat, every process, other users of
// the machine included).
func BenchmarkWorkerFleet(b *testing.B) {
	const fleetRuns, conc = 200, 8
	testkit.PostgresURL(b) // skips (fails under CI) without a server
	bin := buildAgentctl(b)
	srv := mcptest.Start(b, mcptest.Options{}, mcptest.ToolDef{Name: "a"})
	wf, err := spec.Load(benchWorkflow(b, srv.URL, "a", 1))
	if err != nil {
		b.Fatal(err)
	}
	sizes := []int{1, 2, 4}
	wall := make([]time.Duration, len(sizes))
	var floor1, floor8 float64
	var workerCPU, pgCPU, selfCPU, busy, busyWall time.Duration
	var machine float64
	for i := 0; i < b.N; i++ {
		for s, k := range sizes {
			dsn := testkit.PostgresDB(b)
			submitFleet(b, dsn, wf, fleetRuns)
			pg0, m0, ss0, self0 := postgresCPU(b), machineCPU(b), pgSessions(b, dsn), cpuTime(b)
			d, cpu := drainWith(b, bin, dsn, k, conc)
			wall[s] += d
			b.Logf("%d worker(s): %d runs in %v, %v CPU, %d PostgreSQL sessions opened in the database meanwhile", k, fleetRuns, d.Round(time.Millisecond), cpu.Round(time.Millisecond), pgSessions(b, dsn)-ss0)
			if k == 4 {
				pg1, m1 := postgresCPU(b), machineCPU(b)
				workerCPU += cpu
				pgCPU += pg1 - pg0
				selfCPU += cpuTime(b) - self0
				busy += m1.busy - m0.busy
				machine += float64(m1.busy-m0.busy) / float64(m1.total-m0.total)
				busyWall += d
			}
			if err := checkFleet(dsn, fleetRuns); err != nil {
				b.Fatalf("%d worker(s): %v", k, err)
			}
		}
		r1, r8 := insertFloor(b, testkit.PostgresDB(b))
		floor1 += r1
		floor8 += r8
	}
	rate := func(s int) float64 { return float64(fleetRuns*b.N) / wall[s].Seconds() }
	for s, k := range sizes {
		b.ReportMetric(rate(s), fmt.Sprintf("%dw-calls/s", k))
	}
	b.ReportMetric(rate(2)/rate(0), "ratio-4w/1w")
	b.ReportMetric(floor1/float64(b.N), "insert-commits/s")
	b.ReportMetric(floor8/float64(b.N), "insert-commits/s-8conn")
	b.ReportMetric(workerCPU.Seconds()/busyWall.Seconds(), "4w-workers-cores")
	b.ReportMetric(pgCPU.Seconds()/busyWall.Seconds(), "4w-postgres-cores")
	b.ReportMetric(selfCPU.Seconds()/busyWall.Seconds(), "4w-mcpserver-cores")
	b.ReportMetric(machine/float64(b.N), "4w-machine-busy")
}

// submitFleet queues n runs of wf on dsn, 8 submitters at once.
func submitFleet(b *testing.B, dsn string, wf *spec.Workflow, n int) {
	b.Helper()
	ctx := context.Background()
	db, err := events.Open(ctx, dsn, events.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &workflow.Runner{DB: db}
			for range next {
				if _, err := r.Submit(ctx, wf, map[string]any{}, workflow.RunOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
}

// drainWith runs k `worker --drain` processes on dsn at once and returns
// the wall time until the last exits and their CPU time (user + system).
func drainWith(b *testing.B, bin, dsn string, k, conc int) (time.Duration, time.Duration) {
	b.Helper()
	cmds := make([]*exec.Cmd, k)
	outs := make([]bytes.Buffer, k)
	start := time.Now()
	for j := range cmds {
		cmds[j] = exec.Command(bin, "worker", "--drain", "--concurrency", strconv.Itoa(conc), "--db", dsn)
		cmds[j].Stdout, cmds[j].Stderr = &outs[j], &outs[j]
		if err := cmds[j].Start(); err != nil {
			b.Fatal(err)
		}
	}
	var cpu time.Duration
	for j, c := range cmds {
		if err := c.Wait(); err != nil {
			b.Fatalf("worker %d of %d: %v\n%s", j+1, k, err, outs[j].String())
		}
		cpu += c.ProcessState.UserTime() + c.ProcessState.SystemTime()
	}
	return time.Since(start), cpu
}

// checkFleet fails unless all n runs on dsn succeeded.
func checkFleet(dsn string, n int) error {
	db, err := events.Open(context.Background(), dsn, events.Options{})
	if err != nil {
		return err
	}
	defer db.Close()
	var ok int
	if err := db.SQL().Get(&ok, `SELECT COUNT(*) FROM runs WHERE state = 'succeeded'`); err != nil {
		return err
	}
	if ok != n {
		return fmt.Errorf("%d of %d runs succeeded", ok, n)
	}
	return nil
}

// insertFloor measures single-row INSERT commits per second on dsn's
// server (autocommit, synchronous_commit as configured): 500 from one
// connection, then 8 connections inserting 250 each at once.
func insertFloor(b *testing.B, dsn string) (one, eight float64) {
	b.Helper()
	ctx := context.Background()
	x, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	x.SetMaxOpenConns(8)
	if _, err := x.ExecContext(ctx, `CREATE TABLE bench_floor (id bigserial PRIMARY KEY, v text NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	insert := func(n int) error {
		for range n {
			if _, err := x.ExecContext(ctx, `INSERT INTO bench_floor (v) VALUES ($1)`, "0123456789abcdef"); err != nil {
				return err
			}
		}
		return nil
	}
	start := time.Now()
	if err := insert(500); err != nil {
		b.Fatal(err)
	}
	one = 500 / time.Since(start).Seconds()
	errs := make(chan error, 8)
	start = time.Now()
	for range 8 {
		go func() { errs <- insert(250) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	return one, 2000 / time.Since(start).Seconds()
}

// pgSessions is how many sessions dsn's database has seen
// (pg_stat_database.sessions, PostgreSQL ≥ 14; every user of the database
// counts, so it is indicative on a shared server).
func pgSessions(b *testing.B, dsn string) int64 {
	b.Helper()
	x, err := sql.Open("pgx", dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	var n int64
	if err := x.QueryRow(`SELECT sessions FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

// clockTick is the kernel's USER_HZ, the unit of /proc CPU times (100 on
// Linux for x86 and arm).
const clockTick = 10 * time.Millisecond

// postgresCPU is the CPU time (user + system) the PostgreSQL server has
// used so far: every process named postgres alive now, plus the time of
// the sessions that ended, which the postmaster reaped (its cutime and
// cstime), so that a session born and gone between two samples counts.
func postgresCPU(b *testing.B) time.Duration {
	b.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		b.Fatal(err)
	}
	var ticks int64
	for _, p := range procs {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue // the process ended
		}
		s := string(raw)
		lp, rp := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if lp < 0 || rp < lp || s[lp+1:rp] != "postgres" {
			continue
		}
		// f[0] is field 3 (state); utime, stime, cutime, cstime are
		// fields 14 to 17.
		f := strings.Fields(s[rp+1:])
		if len(f) < 15 {
			continue
		}
		for _, v := range f[11:15] {
			n, _ := strconv.ParseInt(v, 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * clockTick
}

// cpuSample is the machine's CPU time so far, all cores: busy and total.
type cpuSample struct{ busy, total time.Duration }

// machineCPU reads the first line of /proc/stat (busy = all but idle and
// iowait).
func machineCPU(b *testing.B) cpuSample {
	b.Helper()
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		b.Fatalf("/proc/stat: unexpected first line %q", line)
	}
	var total, idle int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i >= 8 { // guest time is already counted in user
			break
		}
		total += n
		if i == 3 || i == 4 {
			idle += n
		}
	}
	return cpuSample{busy: time.Duration(total-idle) * clockTick, total: time.Duration(total) * clockTick}
}
