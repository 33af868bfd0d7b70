// Command producer is the agentctl side of the peer benchmark (bench/peers)
// that runs agentctl's Go packages in one process:
//
//	producer -mode submit -db DSN -wf FILE -n N -conc K   # queue N runs, K at once
//	producer -mode run    -db DSN -wf FILE                # one run, in this process
//	producer -mode queue  -db DSN -wf FILE -n N -conc K   # queue N runs, then drain them here
//	producer -mode runs   -db DSN -wf FILE -n N -conc K   # execute N runs here, K at once, no queue
//
// -warm FILE first runs FILE once, untimed, in this process: the database
// connection, the server's backend and the Go runtime are then as warm as a
// long-lived program's (DBOS's, launched once by bench/peers, is), and run
// and runs borrow the warm-up's MCP session from their shared pool, as
// DBOS's shared-session variant uses its connected session. Its run id is
// printed (warmRun) so that bench/peers leaves its rows out.
//
// submit is the producer of agentctl's queued many-runs path: what
// `agentctl submit` calls (workflow.Runner.Submit), without a process per
// run. run, runs and queue measure agentctl through its Go API alone
// (workflow.Runner.Run: one run, or N sharing one session pool as `agentctl
// run --inputs` does; worker.Worker), with no process start in the timed
// part: they print the timed part's wall and CPU as JSON on stdout.
//
// It is a module of its own that requires agentctl alone, so it is built
// with exactly agentctl's dependency versions, as the agentctl binary is.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
	"github.com/agentctl/agentctl/workflow/worker"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "producer:", err)
		os.Exit(1)
	}
}

// timing is what run, runs and queue print: the timed part's wall and CPU
// (this process, user + system) by part, in nanoseconds.
type timing struct {
	Wall map[string]time.Duration `json:"wallNs"`
	CPU  map[string]time.Duration `json:"cpuNs"`
	// WarmRun is the -warm run's id, whose rows are not the timed part's.
	WarmRun string `json:"warmRun,omitempty"`
}

func run(args []string) error {
	fs := flag.NewFlagSet("producer", flag.ContinueOnError)
	mode := fs.String("mode", "submit", "submit, run, queue or runs")
	db := fs.String("db", "", "agentctl's database (a SQLite path or a postgres:// URL)")
	file := fs.String("wf", "", "the workflow file")
	n := fs.Int("n", 1, "runs to queue (runs: to execute)")
	conc := fs.Int("conc", 1, "submits at once, and (queue, runs) runs executed at once")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the timed parts to this file")
	warm := fs.String("warm", "", "a workflow run once, untimed, before the timed part (run, runs and queue)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *db == "" || *file == "" || *n < 1 || *conc < 1 {
		return errors.New("-db and -wf are required; -n and -conc must be at least 1")
	}
	ctx := context.Background()
	wf, err := spec.Load(*file)
	if err != nil {
		return err
	}
	edb, err := events.Open(ctx, *db, events.Options{})
	if err != nil {
		return err
	}
	defer edb.Close()
	t := timing{Wall: map[string]time.Duration{}, CPU: map[string]time.Duration{}}
	// pool is the timed runs' session pool: nil (each run opens its own
	// session) unless a warm-up opened one for them.
	var pool *workflow.SessionPool
	if *warm != "" && *mode != "submit" {
		pool = workflow.NewSessionPool()
		defer pool.Close()
		if t.WarmRun, err = warmUp(ctx, edb, pool, *warm); err != nil {
			return err
		}
	}
	return t.measure(ctx, edb, pool, wf, *mode, *n, *conc, *cpuProfile)
}

// measure runs mode's timed parts, then prints t.
func (t timing) measure(ctx context.Context, edb *events.DB, pool *workflow.SessionPool, wf *spec.Workflow, mode string, n, conc int, cpuProfile string) error {
	var err error
	part := func(name string, fn func() error) error {
		if cpuProfile != "" {
			stop, err := startProfile(cpuProfile)
			if err != nil {
				return err
			}
			defer stop()
		}
		start, cpu0 := time.Now(), cpuTime()
		err := fn()
		t.Wall[name], t.CPU[name] = time.Since(start), cpuTime()-cpu0
		return err
	}
	switch mode {
	case "submit":
		if err := submit(ctx, edb, wf, n, conc); err != nil {
			return err
		}
		return edb.Close()
	case "run":
		err = part("run", func() error {
			res, err := (&workflow.Runner{DB: edb, Sessions: pool}).Run(ctx, wf, map[string]any{}, workflow.RunOptions{Command: "run"})
			if err != nil {
				return err
			}
			if res.State != "succeeded" {
				return fmt.Errorf("run %s ended %s", res.RunID, res.State)
			}
			return nil
		})
	case "queue":
		if err = part("submit", func() error { return submit(ctx, edb, wf, n, conc) }); err != nil {
			return err
		}
		err = part("drain", func() error {
			// NewRunner is required: worker.Worker calls it without a nil check.
			w := &worker.Worker{DB: edb, Concurrency: conc, Drain: true, NewRunner: func() *workflow.Runner { return &workflow.Runner{} }}
			done, err := w.Run(ctx)
			if err != nil {
				return err
			}
			ok := 0
			for _, r := range done {
				if r.State == "succeeded" {
					ok++
				}
			}
			if ok != n {
				return fmt.Errorf("worker: %d of %d runs succeeded", ok, n)
			}
			return nil
		})
	case "runs":
		err = part("runs", func() error { return runMany(ctx, edb, pool, wf, n, conc) })
	default:
		return fmt.Errorf("-mode %q: want submit, run, queue or runs", mode)
	}
	if err != nil {
		return err
	}
	if err := json.NewEncoder(os.Stdout).Encode(t); err != nil {
		return err
	}
	return edb.Close()
}

// submit queues n runs of wf through workflow.Runner.Submit, conc at once.
func submit(ctx context.Context, edb *events.DB, wf *spec.Workflow, n, conc int) error {
	r := &workflow.Runner{DB: edb}
	err := fanOut(n, conc, func() func() error {
		return func() error {
			_, err := r.Submit(ctx, wf, map[string]any{}, workflow.RunOptions{Command: "submit"})
			return err
		}
	})
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	return nil
}

// warmUp runs the workflow file once with pool and returns its run id.
func warmUp(ctx context.Context, edb *events.DB, pool *workflow.SessionPool, file string) (string, error) {
	wf, err := spec.Load(file)
	if err != nil {
		return "", err
	}
	res, err := (&workflow.Runner{DB: edb, Sessions: pool}).Run(ctx, wf, map[string]any{}, workflow.RunOptions{Command: "run"})
	if err != nil {
		return "", fmt.Errorf("warm-up run: %w", err)
	}
	if res.State != "succeeded" {
		return "", fmt.Errorf("warm-up run %s ended %s", res.RunID, res.State)
	}
	return res.RunID, nil
}

// runMany executes n runs of wf in this process, conc at once, through
// workflow.Runner.Run with one session pool (pool, or a new one): what
// `agentctl run --inputs` does, and what dbos.RunWorkflow in a loop does for
// DBOS.
func runMany(ctx context.Context, edb *events.DB, pool *workflow.SessionPool, wf *spec.Workflow, n, conc int) error {
	if pool == nil {
		pool = workflow.NewSessionPool()
		defer pool.Close()
	}
	return fanOut(n, conc, func() func() error {
		r := &workflow.Runner{DB: edb, Sessions: pool} // one per goroutine
		return func() error {
			res, err := r.Run(ctx, wf, map[string]any{}, workflow.RunOptions{Command: "run"})
			if err == nil && res.State != "succeeded" {
				err = fmt.Errorf("run %s ended %s", res.RunID, res.State)
			}
			return err
		}
	})
}

// fanOut calls one of n jobs at a time on each of min(conc, n) goroutines;
// newJob builds each goroutine's job. The first error stops every
// goroutine from taking more; the errors are joined.
func fanOut(n, conc int, newJob func() func() error) error {
	var next atomic.Int64
	errs := make(chan error, conc)
	var wg sync.WaitGroup
	for range min(conc, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			job := newJob()
			for next.Add(1) <= int64(n) {
				if err := job(); err != nil {
					errs <- err
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

// startProfile starts a CPU profile into path (a part's: the last part
// profiled overwrites it) and returns the function that stops it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("-cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
	}, nil
}

// cpuTime returns this process's CPU time so far (user + system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
