package main

import (
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
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Short: "Queue a run of a workflow file for a worker; prints its id and calls nothing",
		Long: `submit validates the workflow file and its inputs exactly as run does, records the run as
queued (run.created with "queued": true) and prints its id. Nothing is sent to any server:
"agentctl worker" claims queued runs and executes them.`,
		Example: `  agentctl submit examples/lookup.yaml --input query=mcp
  agentctl submit wf.yaml --output json | jq -r .data.runId
  agentctl worker --drain`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wf, err := spec.Load(args[0])
			if err != nil {
				return invalid(err) // exit 3 for a file only the policy forbids, as run
			}
			inputs, err := f.resolve(wf)
			if err != nil {
				return err
			}
			opts := workflow.RunOptions{Command: "submit"}
			traceParentOpts(&opts)
			return a.withDB(cmd.Context(), func(db *events.DB) error {
				id, err := (&workflow.Runner{DB: db}).Submit(cmd.Context(), wf, inputs, opts)
				if err != nil {
					return err
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "SubmitResult", true, submitResult{RunID: id, State: "queued"})
				}
				fmt.Fprintln(a.stdout, id)
				return nil
			})
		},
	}
	f.register(cmd)
	return cmd
}
