package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// submitResult is the data of a SubmitResult envelope.
type submitResult struct {
	RunID string `json:"runId"`
	State string `json:"state"`
}

func (a *app) submitCmd() *cobra.Command {
	var f runFlags
	var many string
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Short: "Queue a run of a workflow file for a worker; prints its id and calls nothing",
		Long: `submit validates the workflow file and its inputs exactly as run does, records the run as
queued (run.created with "queued": true) and prints its id. Nothing is sent to any server:
"agentctl worker" claims queued runs and executes them.

--inputs FILE queues one run per line of FILE ("-" for stdin), in one process: each line is
one run's inputs as a JSON object, checked and recorded as a single submit would (blank lines
are skipped). Lines are taken in order, each all or nothing: the first bad line stops submit
with exit 2 naming FILE:LINE, and the runs of the lines before it stay queued (their ids
were printed).`,
		Example: `  agentctl submit examples/lookup.yaml --input query=mcp
  agentctl submit wf.yaml --output json | jq -r .data.runId
  agentctl submit wf.yaml --inputs runs.jsonl
  producer | agentctl submit wf.yaml --inputs -
  agentctl worker --drain`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wf, err := spec.Load(args[0])
			if err != nil {
				return invalid(err) // exit 3 for a file only the policy forbids, as run
			}
			opts := workflow.RunOptions{Command: "submit"}
			traceParentOpts(&opts)
			if many != "" {
				if len(f.inputs) > 0 || f.inputsFile != "" {
					return usageErr("--inputs gives each run its inputs; it does not combine with --input or --inputs-file")
				}
				return a.submitMany(cmd.Context(), wf, many, opts)
			}
			inputs, err := f.resolve(wf)
			if err != nil {
				return err
			}
			return a.withDB(cmd.Context(), func(db *events.DB) error {
				id, err := (&workflow.Runner{DB: db}).Submit(cmd.Context(), wf, inputs, opts)
				if err != nil {
					return err
				}
				return a.printSubmitted(id)
			})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&many, "inputs", "", `JSON-lines file, one run's inputs a line ("-" for stdin): queue one run per line`)
	return cmd
}

// printSubmitted prints the id of a queued run: one line, or one
// SubmitResult envelope.
func (a *app) printSubmitted(id string) error {
	if a.output != "human" {
		return a.printJSON(a.stdout, "SubmitResult", true, submitResult{RunID: id, State: "queued"})
	}
	_, err := fmt.Fprintln(a.stdout, id)
	return err
}

// submitMany queues one run of wf per line of the JSON-lines file path
// ("-" = stdin), in order, through one database handle; it stops at the
// first line that does not parse, check or record, naming it.
func (a *app) submitMany(ctx context.Context, wf *spec.Workflow, path string, opts workflow.RunOptions) error {
	r, name, closeInputs, err := openInputLines(path)
	if err != nil {
		return err
	}
	defer closeInputs()
	return a.withDB(ctx, func(db *events.DB) error {
		runner := &workflow.Runner{DB: db}
		return eachInputLine(r, name, wf, func(line int, inputs map[string]any) error {
			id, err := runner.Submit(ctx, wf, inputs, opts)
			if err != nil {
				return fmt.Errorf("%s:%d: %w", name, line, err)
			}
			return a.printSubmitted(id)
		})
	})
}
