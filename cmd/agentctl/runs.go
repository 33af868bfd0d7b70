package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

func (a *app) runsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List recorded runs",
		Example: `  agentctl runs list
  agentctl runs list --output json | jq '.data[] | select(.state == "failed")'`,
	}
	var limit int
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first: id, workflow, state, started, duration, calls",
		Example: `  agentctl runs list
  agentctl runs list --limit 10 --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageErr("--limit %d: want 0 (all) or more", limit)
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				runs, err := projector.ListRuns(cmd.Context(), db, limit)
				if err != nil {
					return err
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "RunList", true, runs)
				}
				fmt.Fprintf(a.stdout, "%-43s %-20s %-10s %-20s %10s %5s\n", "ID", "WORKFLOW", "STATE", "STARTED", "DURATION", "CALLS")
				for _, r := range runs {
					dur := "-"
					if r.DurationMS != nil {
						dur = (time.Duration(*r.DurationMS) * time.Millisecond).String()
					}
					started := r.StartedAt
					if t, err := time.Parse(time.RFC3339Nano, r.StartedAt); err == nil {
						started = t.Format("2006-01-02 15:04:05")
					}
					fmt.Fprintf(a.stdout, "%-43s %-20s %-10s %-20s %10s %5d\n", r.RunID, clean(r.Workflow), r.State, started, dur, r.Calls)
				}
				return nil
			})
		},
	}
	list.Flags().IntVar(&limit, "limit", 0, "show at most this many runs (0 = all)")
	cmd.AddCommand(list)
	return cmd
}
