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
		Short: "List and manage recorded runs",
		Example: `  agentctl runs list
  agentctl runs list --output json | jq '.data[] | select(.state == "failed")'`,
	}
	var limit int
	var state string
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first: id, workflow, state, started, duration, calls",
		Long: `Lists runs from the runs projection, newest first. A run submitted with "agentctl submit" is
"queued" until a worker claims it; STARTED is then when the worker started it.`,
		Example: `  agentctl runs list
  agentctl runs list --state queued
  agentctl runs list --limit 10 --output json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return usageErr("--limit %d: want 0 (all) or more", limit)
			}
			switch state {
			case "", "queued", "running", "succeeded", "failed", "uncertain", "cancelled":
			default:
				return usageErr("--state %q: want queued, running, succeeded, failed, uncertain or cancelled", state)
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				fetch := limit
				if state != "" {
					fetch = 0 // filter, then limit
				}
				runs, err := projector.ListRuns(cmd.Context(), db, fetch)
				if err != nil {
					return err
				}
				runs = filterRuns(runs, state, limit)
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
	list.Flags().StringVar(&state, "state", "", "show only runs in this state (queued, running, succeeded, failed, uncertain, cancelled)")
	cmd.AddCommand(list)
	return cmd
}

// filterRuns keeps the runs in state ("" = all), at most limit of them
// (0 = all).
func filterRuns(runs []projector.RunSummary, state string, limit int) []projector.RunSummary {
	out := runs[:0]
	for _, r := range runs {
		if state != "" && r.State != state {
			continue
		}
		if limit > 0 && len(out) == limit {
			break
		}
		out = append(out, r)
	}
	return out
}
