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
	wall  time.Duration // the timed part (Go API only: the producer's own timing)
	cpu   time.Duration
	parts map[string]time.Duration
}

// agentctlShape runs sh with agentctl as users run it. The one-run shapes
// are one `agentctl run` process. The many-runs shapes queue the runs from
// one producer process (bench/peers/producer: workflow.Runner.Submit, what
// `agentctl submit` calls, in-flight at once for shape 4), then one
// `agentctl worker --drain --concurrency K` executes them. db is agentctl's
// database: the PostgreSQL schema, or the SQLite file.
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
		return agentSample{cpu: cpu, parts: map[string]time.Duration{"run": d}}, nil
	}
	before, err := e.succeededRuns(ctx, db)
	if err != nil {
		return agentSample{}, err
	}
	dSubmit, cpuSubmit, err := e.process(ctx, e.cfg.producer, "-mode", "submit", "-db", db, "-wf", filepath.Join(e.dir, "one.yaml"),
		"-n", strconv.Itoa(sh.calls), "-conc", strconv.Itoa(sh.inFlight))
	if err != nil {
		return agentSample{}, err
	}
	dDrain, cpuDrain, err := e.process(ctx, e.cfg.agentctl, "worker", "--drain", "--concurrency", strconv.Itoa(sh.inFlight), "--db", db)
	if err != nil {
		return agentSample{}, err
	}
	after, err := e.succeededRuns(ctx, db)
	if err != nil {
		return agentSample{}, err
	}
	if after-before != sh.calls {
		return agentSample{}, fmt.Errorf("agentctl: %d runs succeeded, want %d", after-before, sh.calls)
	}
	return agentSample{cpu: cpuSubmit + cpuDrain, parts: map[string]time.Duration{"submit": dSubmit, "drain": dDrain}}, nil
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
// (workflow.Runner.Run for the one-run shapes; Runner.Submit then
// workflow.Worker with Drain for the many-runs shapes) and returns the
// wall and CPU of the part the producer timed, which leaves out its start
// and its opening of the database.
func (e *env) agentAPIShape(ctx context.Context, sh shape, db string) (agentSample, error) {
	args := []string{"-mode", "run", "-db", db, "-wf", filepath.Join(e.dir, "seq.yaml")}
	if sh.inFlight > 1 && !sh.oneCall {
		args[len(args)-1] = filepath.Join(e.dir, "conc.yaml")
	}
	if sh.oneCall {
		args = []string{"-mode", "queue", "-db", db, "-wf", filepath.Join(e.dir, "one.yaml"), "-n", strconv.Itoa(sh.calls), "-conc", strconv.Itoa(sh.inFlight)}
	}
	cmd := exec.CommandContext(ctx, e.cfg.producer, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return agentSample{}, fmt.Errorf("producer %s: %w\n%s", args[1], err, stderr.Bytes())
	}
	var t struct {
		Wall map[string]time.Duration `json:"wallNs"`
		CPU  map[string]time.Duration `json:"cpuNs"`
	}
	if err := json.Unmarshal(out, &t); err != nil {
		return agentSample{}, fmt.Errorf("producer %s printed %q: %w", args[1], out, err)
	}
	a := agentSample{parts: t.Wall}
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
