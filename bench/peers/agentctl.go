package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// agentSample is what agentctlShape measured beyond the wall time: the
// CPU of the processes it ran and the wall time of each part.
type agentSample struct {
	// wall is the timed part: the processes' wall times (the run count
	// checked around them left out), or the producer's own timing.
	wall  time.Duration
	cpu   time.Duration
	parts map[string]time.Duration
	// warmRun is the producer's untimed warm-up run, whose rows are left
	// out of the shape's.
	warmRun string
}

// agentctlShape runs sh with agentctl as users run it, in one process
// each: the one-run shapes are one `agentctl run`; the many-runs shapes
// are one `agentctl run one.yaml --inputs FILE --runs-in-flight K`, which
// executes the runs in its process directly, as dbos.RunWorkflow does for
// DBOS. db is agentctl's database: the PostgreSQL schema, or the SQLite
// file.
func (e *env) agentctlShape(ctx context.Context, sh shape, db string) (agentSample, error) {
	if !sh.oneCall {
		file := "seq.yaml"
		if sh.inFlight > 1 {
			file = "conc.yaml"
		}
		d, cpu, err := e.process(ctx, e.cfg.agentctl, "run", filepath.Join(e.dir, file), "--db", db, "--output", "json")
		if err != nil {
			return agentSample{}, err
		}
		return agentSample{wall: d, cpu: cpu, parts: map[string]time.Duration{"run": d}}, nil
	}
	var a agentSample
	err := e.checkRuns(ctx, db, sh.calls, func() error {
		d, cpu, err := e.process(ctx, e.cfg.agentctl, "run", filepath.Join(e.dir, "one.yaml"), "--inputs", e.inputsFile(sh.calls),
			"--runs-in-flight", strconv.Itoa(sh.inFlight), "--db", db, "--output", "json")
		a = agentSample{wall: d, cpu: cpu, parts: map[string]time.Duration{"run --inputs": d}}
		return err
	})
	return a, err
}

// agentctlQueuedShape runs a many-runs shape through agentctl's queue, as
// a fleet does: one producer process (bench/peers/producer:
// workflow.Runner.Submit, what `agentctl submit` calls, in-flight at once
// for shape 4) queues the runs, then one `agentctl worker --drain
// --concurrency K` claims and executes them.
func (e *env) agentctlQueuedShape(ctx context.Context, sh shape, db string) (agentSample, error) {
	var a agentSample
	err := e.checkRuns(ctx, db, sh.calls, func() error {
		dSubmit, cpuSubmit, err := e.process(ctx, e.cfg.producer, "-mode", "submit", "-db", db, "-wf", filepath.Join(e.dir, "one.yaml"),
			"-n", strconv.Itoa(sh.calls), "-conc", strconv.Itoa(sh.inFlight))
		if err != nil {
			return err
		}
		dDrain, cpuDrain, err := e.process(ctx, e.cfg.agentctl, "worker", "--drain", "--concurrency", strconv.Itoa(sh.inFlight), "--db", db)
		a = agentSample{wall: dSubmit + dDrain, cpu: cpuSubmit + cpuDrain, parts: map[string]time.Duration{"submit": dSubmit, "drain": dDrain}}
		return err
	})
	return a, err
}

// checkRuns calls fn and checks that exactly want more runs succeeded in
// db after it than before.
func (e *env) checkRuns(ctx context.Context, db string, want int, fn func() error) error {
	before, err := e.succeededRuns(ctx, db)
	if err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	after, err := e.succeededRuns(ctx, db)
	if err != nil {
		return err
	}
	if after-before != want {
		return fmt.Errorf("agentctl: %d runs succeeded, want %d", after-before, want)
	}
	return nil
}

// succeededRuns counts agentctl's succeeded runs in db: on PostgreSQL from
// its runs table, on SQLite with `agentctl runs list` (this module links no
// SQLite driver).
func (e *env) succeededRuns(ctx context.Context, db string) (int, error) {
	if db == e.liteDB {
		out, err := exec.CommandContext(ctx, e.cfg.agentctl, "runs", "list", "--db", db, "--state", "succeeded", "--output", "json").Output()
		if err != nil {
			return 0, fmt.Errorf("agentctl runs list: %w", err)
		}
		var list struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(out, &list); err != nil {
			return 0, fmt.Errorf("agentctl runs list printed %.200q: %w", out, err)
		}
		return len(list.Data), nil
	}
	var n int
	err := e.admin.QueryRow(ctx, "SELECT count(*) FROM "+schemaAgentctl+".runs WHERE state = 'succeeded'").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count agentctl's succeeded runs: %w", err)
	}
	return n, nil
}

// agentAPIShape runs sh through agentctl's Go API in one producer process
// (workflow.Runner.Run for the one-run shapes; for the many-runs shapes,
// Runner.Run per run with one session pool, -mode runs, or with queued,
// Runner.Submit then workflow.Worker with Drain, -mode queue) and returns
// the wall and CPU of the part the producer timed, which leaves out its
// start, its opening of the database and a warm-up run of one.yaml: the
// Go API is measured in a program as warm as the one DBOS runs in (it is
// launched once and serves every round), its runs borrowing the warm-up's
// MCP session as DBOS's shared variant uses its connected one.
func (e *env) agentAPIShape(ctx context.Context, sh shape, db string, queued bool) (agentSample, error) {
	args := []string{"-mode", "run", "-db", db, "-wf", filepath.Join(e.dir, "seq.yaml")}
	if sh.inFlight > 1 && !sh.oneCall {
		args[len(args)-1] = filepath.Join(e.dir, "conc.yaml")
	}
	if sh.oneCall {
		mode := "runs"
		if queued {
			mode = "queue"
		}
		args = []string{"-mode", mode, "-db", db, "-wf", filepath.Join(e.dir, "one.yaml"), "-n", strconv.Itoa(sh.calls), "-conc", strconv.Itoa(sh.inFlight)}
	}
	args = append(args, "-warm", filepath.Join(e.dir, "one.yaml"))
	cmd := exec.CommandContext(ctx, e.cfg.producer, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return agentSample{}, fmt.Errorf("producer %s: %w\n%s", args[1], err, stderr.Bytes())
	}
	var t struct {
		Wall    map[string]time.Duration `json:"wallNs"`
		CPU     map[string]time.Duration `json:"cpuNs"`
		WarmRun string                   `json:"warmRun"`
	}
	if err := json.Unmarshal(out, &t); err != nil {
		return agentSample{}, fmt.Errorf("producer %s printed %q: %w", args[1], out, err)
	}
	a := agentSample{parts: t.Wall, warmRun: t.WarmRun}
	for k, d := range t.Wall {
		a.wall += d
		a.cpu += t.CPU[k]
	}
	return a, nil
}

// process runs name with args to its end and returns its wall time and
// CPU (user + system); a non-zero exit is an error with its output.
func (e *env) process(ctx context.Context, name string, args ...string) (time.Duration, time.Duration, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	err := cmd.Run()
	d := time.Since(start)
	if err != nil {
		tail := out.Bytes()
		if len(tail) > 2000 {
			tail = tail[len(tail)-2000:]
		}
		return 0, 0, fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), args[0], err, tail)
	}
	return d, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// cliSubmit times one `agentctl submit` process (into a schema of its
// own, whose queued runs no worker drains).
func (e *env) cliSubmit(ctx context.Context) (sample, error) {
	d, cpu, err := e.process(ctx, e.cfg.agentctl, "submit", filepath.Join(e.dir, "one.yaml"), "--db", e.submitDSN, "--output", "json")
	if err != nil {
		return sample{}, err
	}
	return sample{Wall: d, CPU: cpu, Calls: 1, Rows: -1}, nil
}
