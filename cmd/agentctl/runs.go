package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/migrations"
	"github.com/agentctl/agentctl/projector"
)

// knownRunStates are the states a run can be recorded in (runs prune --state).
var knownRunStates = []string{"queued", "running", "succeeded", "failed", "uncertain", "cancelled"}

// listRunStates are the states runs list shows: the recorded ones, and
// interrupted (recorded running, but no process writes it).
var listRunStates = append(append([]string{}, knownRunStates...), stateInterrupted)

func checkState(flag, s string, states []string) error {
	if s == "" {
		return nil
	}
	for _, st := range states {
		if s == st {
			return nil
		}
	}
	return usageErr("%s %q: want %s", flag, s, strings.Join(states, ", "))
}

func (a *app) runsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List recorded runs, and prune finished ones",
		Example: `  agentctl runs list --state failed --since 24h
  agentctl runs prune --keep 100 --dry-run`,
	}
	var f projector.RunFilter
	var since string
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first: short id, workflow, mode, state, started, duration, calls",
		Long: `Lists runs from the runs projection, newest first. ID is the run's short form: the last digits
of its id, as many as make it unique (at least 8); every command that takes a run id takes it.
A run submitted with "agentctl submit" is "queued" until a worker claims it; STARTED is then
when the worker started it. A run recorded running that no process writes any more (killed: its
lock on the database file is free, or its PostgreSQL lease expired) is "interrupted":
agentctl resume carries it on. MODE is run (a workflow run or submit), replay, check
(check --remote) or adhoc (mcp tools, mcp call).`,
		Example: `  agentctl runs list
  agentctl runs list --state queued
  agentctl runs list --state failed --workflow lookup-demo --since 7d
  agentctl runs list --state interrupted
  agentctl runs list --mode check
  agentctl runs list --limit 10 --output json | jq -r '.data[].runId'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Limit < 0 {
				return usageErr("--limit %d: want 0 (all) or more", f.Limit)
			}
			if err := checkState("--state", f.State, listRunStates); err != nil {
				return err
			}
			if f.Mode != "" && !slices.Contains(projector.RunModes, f.Mode) {
				return usageErr("--mode %q: want %s", f.Mode, strings.Join(projector.RunModes, ", "))
			}
			if since != "" {
				d, err := parseAge(since)
				if err != nil {
					return usageErr("--since %q: %w", since, err)
				}
				f.Since = time.Now().Add(-d)
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				runs, err := findLiveRuns(cmd.Context(), db, f)
				if err != nil {
					return err
				}
				items, err := withLeases(cmd.Context(), db, runs)
				if err != nil {
					return err
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "RunList", true, items)
				}
				printRuns(a, items, db.Backend() == migrations.Postgres)
				return nil
			})
		},
	}
	list.Flags().IntVar(&f.Limit, "limit", 0, "show at most this many runs (0 = all)")
	list.Flags().StringVar(&f.State, "state", "", "show only runs in this state ("+strings.Join(listRunStates, ", ")+"; interrupted: recorded running, but no process writes it)")
	list.Flags().StringVar(&f.Workflow, "workflow", "", "show only runs of this workflow (metadata.name, exactly)")
	list.Flags().StringVar(&f.Mode, "mode", "", "show only runs of this mode ("+strings.Join(projector.RunModes, ", ")+")")
	list.Flags().StringVar(&since, "since", "", "show only runs started within this long ago (90m, 24h, 7d)")
	cmd.AddCommand(list, a.runsPruneCmd())
	return cmd
}

// findLiveRuns is projector.FindRuns with each running run's live state:
// interrupted when no process writes it. --state running and
// --state interrupted both read the running runs and keep the ones that
// are, before --limit applies.
func findLiveRuns(ctx context.Context, db *events.DB, f projector.RunFilter) ([]projector.RunSummary, error) {
	want, limit := f.State, f.Limit
	if want == "running" || want == stateInterrupted {
		f.State, f.Limit = "running", 0
	}
	runs, err := projector.FindRuns(ctx, db, f)
	if err != nil {
		return nil, err
	}
	out := runs[:0]
	for _, r := range runs {
		if r.State, err = liveState(ctx, db, r.RunID, r.State); err != nil {
			return nil, err
		}
		if want != "" && r.State != want || limit > 0 && len(out) == limit {
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// runListItem is one run of `runs list`: its summary, and on PostgreSQL
// who holds its lease and until when (null when no one does, and always on
// SQLite, where the run lock is a process's kernel lock).
type runListItem struct {
	projector.RunSummary
	// ShortID is the short form human output prints (projector.ShortRunIDs).
	ShortID        string  `json:"shortId"`
	Owner          *string `json:"owner"`
	LeaseExpiresAt *string `json:"leaseExpiresAt"`
}

// withLeases adds the lease of each queued or running run.
func withLeases(ctx context.Context, db *events.DB, runs []projector.RunSummary) ([]runListItem, error) {
	var live []string
	for _, r := range runs {
		if r.State == "queued" || r.State == "running" || r.State == stateInterrupted {
			live = append(live, r.RunID)
		}
	}
	leases, err := db.RunLeases(ctx, live)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	short, err := projector.ShortRunIDs(ctx, db, ids)
	if err != nil {
		return nil, err
	}
	out := make([]runListItem, len(runs))
	for i, r := range runs {
		out[i].RunSummary, out[i].ShortID = r, short[r.RunID]
		if l, ok := leases[r.RunID]; ok {
			exp := l.ExpiresAt.UTC().Format(time.RFC3339Nano)
			out[i].Owner, out[i].LeaseExpiresAt = &l.Owner, &exp
		}
	}
	return out, nil
}

// printRuns writes the runs table for a human; leases adds the OWNER and
// LEASE columns (PostgreSQL).
func printRuns(a *app, runs []runListItem, leases bool) {
	head := fmt.Sprintf("%-12s %-20s %-7s %-11s %-20s %10s %5s", "ID", "WORKFLOW", "MODE", "STATE", "STARTED", "DURATION", "CALLS")
	if leases {
		head += fmt.Sprintf("  %-32s %s", "OWNER", "LEASE")
	}
	fmt.Fprintln(a.stdout, head)
	now := time.Now()
	for _, r := range runs {
		dur := "-"
		if r.DurationMS != nil {
			dur = (time.Duration(*r.DurationMS) * time.Millisecond).String()
		}
		started := r.StartedAt
		if t, err := time.Parse(time.RFC3339Nano, r.StartedAt); err == nil {
			started = t.Format("2006-01-02 15:04:05")
		}
		line := fmt.Sprintf("%-12s %-20s %-7s %-11s %-20s %10s %5d", r.ShortID, clean(r.Workflow), r.Mode, r.State, started, dur, r.Calls)
		if leases {
			owner, until := "-", "-"
			if r.Owner != nil && r.LeaseExpiresAt != nil {
				owner, until = clean(*r.Owner), leaseLeft(*r.LeaseExpiresAt, now)
			}
			line += fmt.Sprintf("  %-32s %s", owner, until)
		}
		fmt.Fprintln(a.stdout, line)
	}
	for _, r := range runs {
		if r.State == stateInterrupted { // on stderr: stdout stays the table
			fmt.Fprintf(a.stderr, "%s is interrupted (no process writes it): agentctl resume %s\n", r.ShortID, r.RunID)
		}
	}
}

// leaseLeft says how long a lease has to run ("12s left"), or that it
// expired ("expired 3s ago": its worker is gone or paused; another worker
// takes the run over).
func leaseLeft(expires string, now time.Time) string {
	t, err := time.Parse(time.RFC3339Nano, expires)
	if err != nil {
		return expires
	}
	if d := t.Sub(now).Round(time.Second); d > 0 {
		return d.String() + " left"
	}
	return "expired " + now.Sub(t).Round(time.Second).String() + " ago"
}

// parseAge reads a Go duration (90m, 24h) or a number of days (7d).
func parseAge(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		days, err := strconv.Atoi(n)
		if err != nil || days < 0 {
			return 0, fmt.Errorf("want a duration such as 90m, 24h or 7d")
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("want a duration such as 90m, 24h or 7d")
	}
	return d, nil
}

// parseBefore reads a date (2026-11-30, in UTC), an RFC 3339 time, or an
// age (7d: runs started more than 7 days ago).
func parseBefore(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	d, err := parseAge(s)
	if err != nil {
		return time.Time{}, fmt.Errorf("want a date (2026-11-30), an RFC 3339 time or an age (30d)")
	}
	return now.Add(-d), nil
}
