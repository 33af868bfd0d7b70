package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// runsResult is the data of a RunsResult envelope (`run --inputs`): the
// runs that ended, in the order of their input lines.
type runsResult struct {
	Runs []runEnded `json:"runs"`
	// Stopped: runs were left unstarted (a signal, a bad line, a storage
	// failure); the lines after the last run listed did not run.
	Stopped bool `json:"stopped"`
}

// runEnded is one run of `run --inputs`: the data of each element of a
// RunsResult's runs, and of a RunEnded envelope (--output jsonl).
type runEnded struct {
	Line       int            `json:"line"` // its line in the inputs file
	RunID      string         `json:"runId"`
	State      string         `json:"state"`
	ExitCode   int            `json:"exitCode"`
	Outputs    map[string]any `json:"outputs"`
	Error      *string        `json:"error"`
	ErrorClass *string        `json:"errorClass"`
	seq        int            // the order it was started in
	err        error          // the run's *workflow.Error, nil if it succeeded
}

// manyRun is one line's run, handed to a slot.
type manyRun struct {
	seq, line int
	inputs    map[string]any
}

// runBatch is the state of one `run --inputs`: the slots (one Runner
// each, sharing one session pool) and what became of the runs.
type runBatch struct {
	a    *app
	db   *events.DB
	wf   *spec.Workflow
	opts workflow.RunOptions
	// halt is closed when no run may start any more (a storage failure,
	// a closed stdout): the runs in flight finish.
	halt     chan struct{}
	haltOnce sync.Once

	mu    sync.Mutex // guards the fields below and the output
	ended []runEnded
	fatal error // the first run that could not be recorded at all
}

// runMany executes one run of wf per line of the JSON-lines file path
// ("-" = stdin) in this process, inFlight at once, each exactly as
// `agentctl run FILE` with that line's inputs would (no queue), the runs
// sharing one MCP session pool. Lines are taken in order; the first bad
// line stops starting runs (exit 2 naming FILE:LINE) and the runs already
// started finish. The exit code is the worst run's (workflow.WorstExit).
func (a *app) runMany(ctx context.Context, wf *spec.Workflow, path string, inFlight int, opts workflow.RunOptions) error {
	if err := requireSecrets(wf); err != nil {
		return err
	}
	r, name, closeInputs, err := openInputLines(path)
	if err != nil {
		return err
	}
	defer closeInputs()
	traceParentOpts(&opts)
	return a.withDB(ctx, func(db *events.DB) error {
		if err := requireLogins(ctx, db, wf); err != nil {
			return err
		}
		b := &runBatch{a: a, db: db, wf: wf, opts: opts, halt: make(chan struct{})}
		pool := workflow.NewSessionPool()
		defer pool.Close()
		jobs := make(chan manyRun)
		var wg sync.WaitGroup
		for range inFlight {
			// Each slot's Runner is built here, in one goroutine
			// (wireTelemetry starts the pipeline once).
			runner := b.newRunner(pool)
			wg.Add(1)
			go func() {
				defer wg.Done()
				b.slot(ctx, runner, jobs)
			}()
		}
		fed := make(chan error, 1)
		go func() {
			fed <- b.feed(ctx, r, name, jobs)
			close(jobs)
		}()
		wg.Wait()
		var feedErr error
		select {
		case feedErr = <-fed:
		default: // still reading stdin after a signal: it is not read further
			feedErr = errStopped
		}
		return b.finish(ctx, feedErr)
	})
}

// errStopped ends feeding lines when the command is cancelled.
var errStopped = errors.New("stopped before the end of the input")

// newRunner is one slot's Runner: no observer per event (without one,
// run.created rides the run's first commit), telemetry when OTEL_* asks.
func (b *runBatch) newRunner(pool *workflow.SessionPool) *workflow.Runner {
	a := b.a
	r := &workflow.Runner{DB: b.db, UserAgent: "agentctl/" + version, Dialer: a.dialer,
		AllowPlaintextCredentials: a.allowPlaintextCreds, Sessions: pool}
	a.wireTelemetry(b.db, r)
	if testHooks.runner != nil {
		testHooks.runner(r)
	}
	return r
}

// feed hands each line's checked inputs to a free slot, in order, until
// the input ends, a line is bad, or no run may start any more.
func (b *runBatch) feed(ctx context.Context, r io.Reader, name string, jobs chan<- manyRun) error {
	seq := 0
	return eachInputLine(r, name, b.wf, func(line int, inputs map[string]any) error {
		select {
		case jobs <- manyRun{seq: seq, line: line, inputs: inputs}:
			seq++
			return nil
		case <-ctx.Done():
			return errStopped
		case <-b.halt:
			return errStopped
		}
	})
}

// slot executes the runs it is handed, one at a time, until there are no
// more or no run may start any more.
func (b *runBatch) slot(ctx context.Context, runner *workflow.Runner, jobs <-chan manyRun) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.halt:
			return
		case j, ok := <-jobs:
			if !ok || ctx.Err() != nil || b.halted() {
				return // a line handed over as the command stopped is not run
			}
			res, err := runner.Run(ctx, b.wf, j.inputs, b.opts)
			if err != nil {
				// Nothing of this run was recorded (storage failed
				// before run.created): start no more.
				b.stop(fmt.Errorf("%s:%d: %w", b.wf.File, j.line, err))
				continue
			}
			b.ended1(j, res)
		}
	}
}

func (b *runBatch) halted() bool {
	select {
	case <-b.halt:
		return true
	default:
		return false
	}
}

// stop records the first fatal error and starts no more runs.
func (b *runBatch) stop(err error) {
	b.mu.Lock()
	if b.fatal == nil {
		b.fatal = err
	}
	b.mu.Unlock()
	b.haltOnce.Do(func() { close(b.halt) })
}

// ended1 records how one run ended and prints it (human: a line on stdout;
// jsonl: a RunEnded envelope), as it ends.
func (b *runBatch) ended1(j manyRun, res *workflow.Result) {
	e := runEnded{Line: j.line, RunID: res.RunID, State: res.State, ExitCode: res.ExitCode, Outputs: res.Outputs, seq: j.seq}
	if res.Err != nil {
		msg, class := res.Err.Error(), errorClass(res.Err, res.ExitCode)
		e.Error, e.ErrorClass, e.err = &msg, &class, res.Err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ended = append(b.ended, e)
	var err error
	switch b.a.output {
	case "jsonl":
		err = b.a.printJSON(b.a.stdout, "RunEnded", res.Err == nil, e)
	case "human":
		// The full id: a short one is the shortest unique suffix among
		// every run in the database, one scan of them per run here.
		line := fmt.Sprintf("run %s %s (exit %d)", e.RunID, e.State, e.ExitCode)
		if e.Error != nil {
			line += ": " + clean(*e.Error)
		}
		_, err = fmt.Fprintln(b.a.stdout, line)
	}
	if err != nil {
		// The reader went away (EPIPE: `| head`): stop as Ctrl-C does;
		// the runs in flight end cancelled, recorded and resumable.
		b.a.stop(fmt.Errorf("stdout closed: %w", err))
	}
}

// finish prints the batch's result (--output json: one RunsResult
// envelope; human: a summary on stderr) and returns the command's error:
// the bad line's, a storage failure's, else the worst run's, else a stop's.
func (b *runBatch) finish(ctx context.Context, feedErr error) error {
	sort.Slice(b.ended, func(i, j int) bool { return b.ended[i].seq < b.ended[j].seq })
	codes := make([]int, len(b.ended))
	for i := range b.ended {
		codes[i] = b.ended[i].ExitCode
	}
	code := workflow.WorstExit(codes...)
	var worst *runEnded // the first run that ended with code
	for i := range b.ended {
		if worst == nil && code != workflow.ExitOK && b.ended[i].ExitCode == code {
			worst = &b.ended[i]
		}
	}
	stopped := feedErr != nil || b.fatal != nil
	a := b.a
	switch a.output {
	case "json":
		ok := code == workflow.ExitOK && !stopped
		if err := a.printJSON(a.stdout, "RunsResult", ok, runsResult{Runs: append([]runEnded{}, b.ended...), Stopped: stopped}); err != nil {
			return err
		}
	case "human":
		failed := countFailed(codes)
		fmt.Fprintf(a.stderr, "runs: %d ended, %d succeeded, %d did not\n", len(codes), len(codes)-failed, failed)
	}
	switch {
	case feedErr != nil && !errors.Is(feedErr, errStopped):
		return feedErr // a bad line: exit 2 naming it
	case b.fatal != nil:
		return b.fatal
	case code != workflow.ExitOK:
		next := nextCommands(worst.RunID, "", worst.State, worst.State == workflow.StateUncertain)
		return &exitError{code: code, runID: worst.RunID, next: next,
			err: fmt.Errorf("%d of %d runs did not succeed; the worst, line %d: %w", countFailed(codes), len(codes), worst.Line, worst.err)}
	case feedErr != nil:
		return &exitError{code: workflow.ExitCancelled, err: fmt.Errorf("%w: %d runs ended (%w)", errStopped, len(codes), context.Cause(ctx))}
	}
	return nil
}

func countFailed(codes []int) int {
	n := 0
	for _, c := range codes {
		if c != workflow.ExitOK {
			n++
		}
	}
	return n
}
