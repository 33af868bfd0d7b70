package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

func (a *app) runsPruneCmd() *cobra.Command {
	var o projector.PruneOptions
	var before string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prune (--before DATE | --keep N) [--state S] [--dry-run]",
		Short: "Delete whole finished runs: their events and projection rows, in one transaction",
		Long: `prune deletes finished runs selected by --before (started before a date, an RFC 3339 time,
or an age such as 30d) and/or --keep (all but the newest N runs; --keep 0 keeps none, so every
finished run the other flags select goes), optionally only those in --state. It prints what will go, then deletes each run's events and projection rows in one
transaction. It is the only way events leave the log: the database refuses any other DELETE
of events (a grant row, inserted and removed inside the prune transaction, lets exactly the
pruned runs go). A run that has not finished is never pruned. A run whose recorded frames a
kept replay references is kept (the list says why), unless the replay is pruned with it.
SQLite only.`,
		Example: `  agentctl runs prune --keep 100 --dry-run
  agentctl runs prune --before 2026-11-01 --state succeeded
  agentctl runs prune --before 30d --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// --keep 0 is a selection (keep none), so "given" is whether
			// the flag was set, not whether it is zero.
			if before == "" && !cmd.Flags().Changed("keep") {
				return usageErr("runs prune: give --before DATE or --keep N (or both)")
			}
			if o.Keep < 0 {
				return usageErr("--keep %d: want 0 or more", o.Keep)
			}
			if before != "" {
				t, err := parseBefore(before, time.Now())
				if err != nil {
					return usageErr("--before %q: %w", before, err)
				}
				o.Before = t
			}
			if err := checkState("--state", o.State, knownRunStates); err != nil {
				return err
			}
			ctx := cmd.Context()
			return a.withExistingDB(ctx, func(db *events.DB) error {
				plan, err := projector.PlanPrune(ctx, db, o)
				if err != nil {
					return err
				}
				if a.output == "human" {
					verb := "pruning"
					if dryRun {
						verb = "would prune"
					}
					fmt.Fprintf(a.stdout, "%s %d run(s), %d event(s)\n", verb, len(plan.Prune), plan.Events)
					for _, r := range plan.Prune {
						fmt.Fprintf(a.stdout, "  %-43s %-20s %-10s %s  %d events\n", r.RunID, clean(r.Workflow), r.State, r.StartedAt, r.Events)
					}
					for _, k := range plan.Kept {
						fmt.Fprintf(a.stdout, "  kept %s: %s\n", k.RunID, k.Reason)
					}
				}
				if !dryRun {
					if err := projector.Prune(ctx, db, plan); err != nil {
						return err
					}
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "PruneResult", true, map[string]any{"dryRun": dryRun, "pruned": plan.Prune, "kept": plan.Kept, "events": plan.Events})
				}
				if !dryRun {
					fmt.Fprintf(a.stdout, "pruned %d run(s), %d event(s)\n", len(plan.Prune), plan.Events)
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "prune runs started before this date (2026-11-30), RFC 3339 time, or age (30d)")
	cmd.Flags().IntVar(&o.Keep, "keep", 0, "keep the newest N runs (in --state, when given) and prune the older finished ones; 0 keeps none")
	cmd.Flags().StringVar(&o.State, "state", "", "prune only runs in this state")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "print what would be pruned and change nothing")
	return cmd
}
