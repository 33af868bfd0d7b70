package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

func (a *app) inspectCmd() *cobra.Command {
	var html htmlFlags
	cmd := &cobra.Command{
		Use:   "inspect RUN_ID",
		Short: "Show a run: tasks, protocol sessions, calls and stream events, from the log",
		Example: `  agentctl inspect run-0190c3f2-...
  agentctl inspect run-0190c3f2-... --output json | jq .data.protocolCalls`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if html.on || html.out != "" {
				return a.inspectHTML(cmd.Context(), args[0], html)
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				doc, err := projector.Inspect(cmd.Context(), db, args[0])
				if err != nil {
					return err
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "Inspect", true, doc)
				}
				printInspect(a.stdout, doc)
				return nil
			})
		},
	}
	html.add(cmd)
	return cmd
}

// printInspect writes the human summary and per-call timeline.
func printInspect(w io.Writer, d *projector.Document) {
	r := d.Run
	fmt.Fprintf(w, "run       %s\nworkflow  %s (%s)\nstate     %s\nstarted   %s\n", r.RunID, clean(r.Workflow), r.Mode, r.State, r.StartedAt)
	if r.FinishedAt != nil {
		fmt.Fprintf(w, "finished  %s\n", *r.FinishedAt)
	}
	if r.Error != nil {
		fmt.Fprintf(w, "error     %s\n", clean(*r.Error))
	}
	fmt.Fprintf(w, "events    %d   calls %d   sessions %d\n", r.Events, r.Calls, len(d.ProtocolSessions))
	fmt.Fprintln(w, "\ntasks")
	for _, t := range d.Tasks {
		fmt.Fprintf(w, "  %-16s attempt %d  %-10s %s/%s\n", t.TaskID, t.Attempt, t.State, deref(t.Server), deref(t.Tool))
	}
	fmt.Fprintln(w, "\nsessions")
	for _, s := range d.ProtocolSessions {
		fmt.Fprintf(w, "  %-10s gen %d  %-13s task %-12s %s\n", s.Remote, s.Generation, s.Status, s.TaskID, deref(s.ProtocolVersion))
	}
	fmt.Fprintln(w, "\ncalls")
	for _, c := range d.ProtocolCalls {
		fmt.Fprintf(w, "  %s  %-12s %s/%s  %-12s gen %d  %-10s reconnects %d\n", c.EffectID[:12], c.TaskID, c.Server, c.Tool, c.Idempotency, c.Generation, c.Status, c.Redispatches)
		if c.Error != nil {
			fmt.Fprintf(w, "      error: %s\n", clean(*c.Error))
		}
		from := ""
		for _, e := range d.StreamEvents {
			if e.EffectID != nil && *e.EffectID == c.EffectID {
				if e.SourceRunID != nil && *e.SourceRunID != from {
					from = *e.SourceRunID
					fmt.Fprintf(w, "      frames recorded by %s (seq and time are that run's)\n", from)
				}
				fmt.Fprintf(w, "      %s  #%d %-18s %s %s\n", e.At, e.Seq, e.Type, e.Dir, deref(e.Method))
			}
		}
	}
	if len(d.Effects) > 0 {
		fmt.Fprintln(w, "\nreconciliations")
		for _, e := range d.Effects {
			fmt.Fprintf(w, "  %s  %s  %s\n", e.EffectID[:12], e.Status, clean(e.Reason))
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return clean(*s)
}
