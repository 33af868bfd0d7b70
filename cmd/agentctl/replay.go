package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
)

func (a *app) replayCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "replay RUN_ID",
		Short: "Re-run a finished run's recorded workflow against its recorded evidence, without the network",
		Long: `Creates a new run (replay-<uuidv7>, mode replay, sourceRunId RUN_ID) that re-executes the
workflow source and inputs stored in RUN_ID's run.created. Every session and tool call is answered
from RUN_ID's recorded evidence: no socket is opened and no secret is read. The calls the workflow
asks for must equal the recorded ones (server, tool, arguments digest, order per task); the first
difference fails the replay with a divergence error naming the task and field (exit 4).
A run that is not finished is refused (exit 2). A replay can itself be replayed.
The replay records its own steps and references the recorded frames it answered from
(replay.frames events) instead of copying them; inspect shows them as the replay's own.`,
		Example: `  agentctl replay run-0190c3f2-...
  agentctl replay run-0190c3f2-... --output json | jq -r .data.runId`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return a.withExistingDB(ctx, func(db *events.DB) error {
				id, err := projector.ResolveRun(ctx, db, args[0])
				if err != nil {
					return err
				}
				rp, err := replay.Prepare(ctx, db, id)
				if errors.Is(err, workflow.ErrRunNotFinished) {
					return &exitError{code: workflow.ExitInvalid, err: err}
				}
				if err != nil {
					return err
				}
				if rp.Command == workflow.CheckCommand { // it called no tool: nothing to answer from
					return usageErr("replay %s: the run is a check (check --remote), which lists tools and calls none: there is nothing to replay; agentctl inspect %s shows its evidence, and check --remote checks again", id, id)
				}
				r := a.runner(db)
				r.Dialer = rp.Dialer
				opts := workflow.RunOptions{Mode: "replay", SourceRunID: rp.SourceRunID, Command: "replay"}
				var res *workflow.Result
				if rp.Command == "mcp tools" { // a listing: no task to run, the session lists
					res, _, err = r.ListToolsWith(ctx, rp.Workflow, "remote", opts)
				} else {
					res, err = r.Run(ctx, rp.Workflow, rp.Inputs, opts)
				}
				if err != nil {
					return err
				}
				var de *workflow.DivergenceError
				if res.Err != nil && errors.As(res.Err, &de) {
					res.ExitCode = workflow.ExitFailed
				}
				if unused := rp.Dialer.Unused(); res.Err == nil && len(unused) > 0 {
					res.State, res.ExitCode = workflow.StateFailed, workflow.ExitFailed
					res.Err = fmt.Errorf("replay diverged from %s: recorded calls never asked for: %s", rp.SourceRunID, strings.Join(unused, ", "))
				}
				return a.printResult(ctx, db, res)
			})
		},
	}
}
