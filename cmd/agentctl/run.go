package main

import (
	"context"
	"fmt"
	"os"
	"sort"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// runFlags are the inputs of `run` (and `demo`).
type runFlags struct {
	inputs      []string
	inputsFile  string
	concurrency int
	// many and inFlight are run --inputs and --runs-in-flight.
	many     string
	inFlight int
}

func (f *runFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVarP(&f.inputs, "input", "i", nil, "workflow input as k=v (v parsed as JSON when it parses, else a string); repeatable")
	cmd.Flags().StringVar(&f.inputsFile, "inputs-file", "", "JSON or YAML file of inputs (--input wins)")
}

// resolve merges --inputs-file and --input and checks them against the workflow.
func (f *runFlags) resolve(wf *spec.Workflow) (map[string]any, error) {
	given := map[string]any{}
	if f.inputsFile != "" {
		m, err := spec.LoadInputsFile(f.inputsFile)
		if err != nil {
			return nil, &exitError{code: workflow.ExitInvalid, err: err}
		}
		for k, v := range m {
			given[k] = v
		}
	}
	for _, kv := range f.inputs {
		k, v, err := spec.ParseInputFlag(kv)
		if err != nil {
			return nil, &exitError{code: workflow.ExitInvalid, err: err} // it names the --input flag
		}
		given[k] = v
	}
	in, err := spec.ResolveInputs(wf, given)
	if err != nil {
		return nil, &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("%s: %w", wf.File, err)}
	}
	return in, nil
}

func (a *app) runCmd() *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run FILE",
		Short: "Run a workflow file, recording every protocol step",
		Long: `run executes the workflow file with its inputs in this process, recording every protocol step.

--inputs FILE executes one run per line of FILE ("-" for stdin), in this one process and
directly (no queue): each line is one run's inputs as a JSON object, checked as --input values
are, and each run is recorded exactly as "agentctl run FILE" with those inputs records it (blank
lines are skipped). --runs-in-flight K runs K at once (default 1); the runs share their MCP
sessions and tool catalogs as a worker's do (each run's log records the session it borrowed).
Lines are taken in order: the first bad line starts no more runs (exit 2 naming FILE:LINE), and
the runs already started finish. Each run prints one line as it ends (its short id, state and
exit code; --output jsonl: a RunEnded object); --output json prints one RunsResult envelope, the
runs in input order. The exit code is the worst run's (uncertain 3, then cancelled 130, then the
first other failure); Ctrl-C starts no more runs and stops those in flight as it stops a run.`,
		Example: `  agentctl run examples/lookup.yaml --input query=mcp
  agentctl run wf.yaml --inputs-file inputs.json --output json
  agentctl run wf.yaml --inputs runs.jsonl --runs-in-flight 8
  producer | agentctl run wf.yaml --inputs - --output jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.checkMany(cmd); err != nil {
				return err
			}
			wf, err := spec.Load(args[0])
			if err != nil {
				return invalid(err)
			}
			if cmd.Flags().Changed("concurrency") && f.concurrency < 1 {
				return invalid(fmt.Errorf("--concurrency must be at least 1, got %d", f.concurrency))
			}
			opts := workflow.RunOptions{Command: "run", Concurrency: f.concurrency}
			lanes := workflowLanes(wf, f.concurrency)
			if f.many != "" {
				a.fitLanes(lanes * f.inFlight)
				return a.runMany(cmd.Context(), wf, f.many, f.inFlight, opts)
			}
			a.fitLanes(lanes)
			inputs, err := f.resolve(wf)
			if err != nil {
				return err
			}
			return a.execRun(cmd.Context(), wf, inputs, opts)
		},
	}
	f.register(cmd)
	cmd.Flags().IntVar(&f.concurrency, "concurrency", 0, "tasks in flight at once, among those whose needs are met (overrides spec.concurrency; 1 runs them one at a time)")
	cmd.Flags().StringVar(&f.many, "inputs", "", `JSON-lines file, one run's inputs a line ("-" for stdin): execute one run per line in this process`)
	cmd.Flags().IntVar(&f.inFlight, "runs-in-flight", 1, "with --inputs: runs executed at once")
	return cmd
}

// checkMany refuses --inputs with --input or --inputs-file (as submit
// does) and --runs-in-flight without --inputs or below 1.
func (f *runFlags) checkMany(cmd *cobra.Command) error {
	switch {
	case f.many != "" && (len(f.inputs) > 0 || f.inputsFile != ""):
		return usageErr("--inputs gives each run its inputs; it does not combine with --input or --inputs-file")
	case cmd.Flags().Changed("runs-in-flight") && f.many == "":
		return usageErr("--runs-in-flight applies to --inputs")
	case f.inFlight < 1:
		return usageErr("--runs-in-flight %d: want 1 or more", f.inFlight)
	}
	return nil
}

// execRun runs wf and prints its result in the chosen output format.
func (a *app) execRun(ctx context.Context, wf *spec.Workflow, inputs map[string]any, opts workflow.RunOptions) error {
	if err := requireSecrets(wf); err != nil {
		return err
	}
	traceParentOpts(&opts)
	return a.withDB(ctx, func(db *events.DB) error {
		if err := requireLogins(ctx, db, wf); err != nil {
			return err
		}
		r := a.runner(db)
		res, err := r.Run(ctx, wf, inputs, opts)
		if err != nil {
			return err
		}
		return a.printResult(ctx, db, res)
	})
}

// requireSecrets refuses (exit 2) a workflow whose header secrets name
// unset environment variables: a local setup mistake, reported with the
// reference and where it is declared before anything is sent or recorded.
func requireSecrets(wf *spec.Workflow) error {
	if ds := wf.UnsetSecrets(os.Getenv); len(ds) > 0 {
		return &exitError{code: workflow.ExitInvalid, err: ds}
	}
	return nil
}

// runner builds a workflow.Runner wired to this invocation's output.
func (a *app) runner(db *events.DB) *workflow.Runner {
	r := &workflow.Runner{DB: db, UserAgent: "agentctl/" + version, Dialer: a.dialer, AllowPlaintextCredentials: a.allowPlaintextCreds}
	switch a.output {
	case "jsonl":
		closed := false
		r.Observe = func(e events.Event) {
			if closed {
				return
			}
			if err := a.printEvent(e); err != nil {
				// The reader went away (EPIPE: `| head`): stop the run as
				// Ctrl-C would; its end is recorded and it can be resumed.
				closed = true
				a.stop(fmt.Errorf("stdout closed: %w", err))
			}
		}
	case "human":
		a.prog = newProgress(a.stderr, a.color)
		a.prog.shortID = func(id string) string {
			s, err := projector.ShortRunID(context.Background(), db, id)
			if err != nil {
				return id // the full id still names it
			}
			return s
		}
		r.Observe = a.prog.observe
	}
	a.wireTelemetry(db, r)
	if testHooks.runner != nil {
		testHooks.runner(r)
	}
	return r
}

// testHooks are set only by this package's tests (TestMain, through
// hooks_test.go), never by the shipping binary, which reads no test switch
// from its environment: a stray variable cannot kill a user's run or cap
// the database.
var testHooks struct {
	// runner adjusts every Runner a command builds (the crash matrix
	// SIGKILLs the process after a chosen event).
	runner func(*workflow.Runner)
	// dbOptions adjusts the storage options (a capped database stands in
	// for a full disk).
	dbOptions func(*events.Options)
	// demoServerEnv adds variables to the environment of `demo --stdio`'s
	// server (the test binary runs main only when told so).
	demoServerEnv func(map[string]spec.EnvValueSpec)
}

// runResult is the data of a RunResult envelope: how the run ended, the
// class of its error (errorClass; null when it succeeded) and the state of
// every task attempt.
type runResult struct {
	RunID      string               `json:"runId"`
	State      string               `json:"state"`
	ExitCode   int                  `json:"exitCode"`
	Outputs    map[string]any       `json:"outputs"`
	Error      *string              `json:"error"`
	ErrorClass *string              `json:"errorClass"`
	Tasks      []projector.TaskView `json:"tasks"`
}

// printResult prints how a run ended; db is the database it was recorded
// in, read for the tasks' states.
func (a *app) printResult(ctx context.Context, db *events.DB, res *workflow.Result) error {
	data := runResult{RunID: res.RunID, State: res.State, ExitCode: res.ExitCode, Outputs: res.Outputs, Tasks: []projector.TaskView{}}
	if res.Err != nil {
		msg, class := res.Err.Error(), errorClass(res.Err, res.ExitCode)
		data.Error, data.ErrorClass = &msg, &class
	}
	if a.output != "human" || res.Err != nil {
		// The run is over and recorded: a cancelled command (Ctrl-C, a
		// closed stdout) still reports it.
		tasks, err := projector.Tasks(context.WithoutCancel(ctx), db, res.RunID)
		if err != nil {
			return err
		}
		data.Tasks = tasks
	}
	if a.output == "human" {
		keys := make([]string, 0, len(res.Outputs))
		for k := range res.Outputs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			writeField(a.stdout, "", k, res.Outputs[k])
		}
		if a.prog != nil {
			a.prog.summary()
		}
		if res.ExitCode == workflow.ExitStorage {
			// The run did not fail: the database did. Say so, not "failed".
			fmt.Fprintf(a.stderr, "run %s stopped: the database failed (storage error, exit 5); the run is resumable once it is fixed\n", res.RunID)
		} else {
			fmt.Fprintf(a.stderr, "run %s %s\n", res.RunID, res.State)
		}
	} else if err := a.printJSON(a.stdout, "RunResult", res.Err == nil, data); err != nil {
		return err
	}
	if res.Err != nil {
		next := nextCommands(res.RunID, "", res.State, anyUncertain(data.Tasks))
		if res.ExitCode == workflow.ExitStorage {
			next = []string{"agentctl resume " + res.RunID}
		}
		return &exitError{code: res.ExitCode, runID: res.RunID, err: res.Err, next: next}
	}
	return nil
}
