package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/projector"
)

func (a *app) dbCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Maintain the database: rebuild projections, manage encryption",
		Example: `  agentctl db rebuild-projections
  agentctl db encryption enable --key-id k1 --key-env AGENTCTL_KEY_K1`,
	}
	rebuild := &cobra.Command{
		Use:   "rebuild-projections [RUN_ID]",
		Short: "Recompute runs, tasks, protocol_sessions, protocol_calls and effects from the log alone",
		Long: `Deletes the projection rows of one run (or of every run) and folds the run's events again,
in one transaction per run. The event log is never changed. Rebuilt rows equal the rows that
were written incrementally while the run was recorded.`,
		Example: `  agentctl db rebuild-projections
  agentctl db rebuild-projections run-0190c3f2-... --output json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			db, err := a.openExisting(ctx)
			if err != nil {
				return err
			}
			defer db.Close()
			var ids []string
			if len(args) == 1 {
				ok, err := db.RunExists(ctx, args[0])
				if err != nil {
					return err
				}
				if !ok {
					return usageErr("unknown run %q", args[0])
				}
				ids = args
			} else if ids, err = projector.RunIDs(ctx, db); err != nil {
				return err
			}
			for _, id := range ids {
				if err := projector.Rebuild(ctx, db, id); err != nil {
					return err
				}
			}
			if a.output != "human" {
				return a.printJSON(a.stdout, "RebuildProjections", true, map[string]any{"runs": ids})
			}
			fmt.Fprintf(a.stdout, "rebuilt projections of %d run(s)\n", len(ids))
			return nil
		},
	}
	cmd.AddCommand(rebuild)
	return cmd
}
