package main

import (
	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/spf13/cobra"
)

func (a *app) resumeCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "resume RUN_ID",
		Short: "Continue a run from its log after a crash, or after reconciling its uncertain call",
		Long: `resume rebuilds every call of the run from the log and carries the run on, appending to the
same run. Completed calls are never sent again: their recorded result is used. A call that was
dispatched with no outcome in the log counts as an ambiguous failure: it is redispatched once
(new session, schema digest unchanged) only if its idempotency is pure, idempotent or keyed and
it was not redispatched before; otherwise it ends uncertain (exit 3). A finished run can be
resumed only after "agentctl effects reconcile" settled the call that left it uncertain.`,
		Example: `  agentctl resume run-0190c3f2-...
  agentctl effects reconcile 3f2a... --status not-applied --reason "no order in the shop" && agentctl resume run-0190c3f2-...`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				id, err := projector.ResolveRun(cmd.Context(), db, args[0])
				if err != nil {
					return err
				}
				res, err := a.runner(db).Resume(cmd.Context(), id)
				if err != nil {
					return err
				}
				return a.printResult(cmd.Context(), db, res)
			})
		},
	}
}
