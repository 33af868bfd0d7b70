package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

func (a *app) inspectCmd() *cobra.Command {
	var follow bool
	cmd := &cobra.Command{
		Use:   "inspect RUN",
		Short: "Show a run: tasks, protocol sessions, calls and stream events, from the log",
		Example: `  agentctl inspect run-0190c3f2-...
  agentctl inspect run-0190c3f2-... --output json | jq .data.protocolCalls
  agentctl inspect last --follow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				id, err := projector.ResolveRun(cmd.Context(), db, args[0])
				if err != nil {
					return err
				}
				if follow {
					return a.follow(cmd.Context(), db, id)
				}
				doc, err := projector.Inspect(cmd.Context(), db, id)
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
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the run's events as they commit, until it ends (one line each; an Event envelope each in json and jsonl)")
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
	fmt.Fprintf(w, "events    %d   calls %d   sessions %d\n", r.Events, r.Calls, countSessions(d.ProtocolSessions))
	fmt.Fprintln(w, "\ntasks")
	tasks := table{}
	for _, t := range d.Tasks {
		tasks.add("", clean(t.TaskID), fmt.Sprintf("attempt %d", t.Attempt), t.State, deref(t.Server)+"/"+deref(t.Tool))
	}
	tasks.write(w, "  ")
	fmt.Fprintln(w, "\nsessions")
	sessions := table{}
	for _, s := range d.ProtocolSessions {
		sessions.add("", clean(s.Remote), fmt.Sprintf("gen %d", s.Generation), s.Status, "task "+clean(s.TaskID), deref(s.ProtocolVersion))
	}
	sessions.write(w, "  ")
	fmt.Fprintln(w, "\ncalls")
	calls := table{}
	for _, c := range d.ProtocolCalls {
		var notes []string
		if c.Error != nil {
			notes = append(notes, "  error: "+clean(*c.Error))
		}
		from := ""
		for _, e := range d.StreamEvents {
			if e.EffectID != nil && *e.EffectID == c.EffectID {
				if e.SourceRunID != nil && *e.SourceRunID != from {
					from = *e.SourceRunID
					notes = append(notes, fmt.Sprintf("  frames recorded by %s (seq and time are that run's)", from))
				}
				notes = append(notes, fmt.Sprintf("  %s  #%d %-18s %s %s", e.At, e.Seq, e.Type, e.Dir, deref(e.Method)))
			}
		}
		calls.add(strings.Join(notes, "\n"), c.EffectID[:12], clean(c.TaskID), clean(c.Server)+"/"+clean(c.Tool), c.Idempotency,
			fmt.Sprintf("gen %d", c.Generation), c.Status, fmt.Sprintf("reconnects %d", c.Redispatches))
	}
	calls.write(w, "  ")
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

// countSessions counts MCP sessions, not rows: every task that used a
// session has a row of its own, all with the session's digest. A row with
// no digest (the session never opened) counts once per remote and
// generation.
func countSessions(ss []projector.SessionView) int {
	seen := map[string]bool{}
	for _, s := range ss {
		key := fmt.Sprintf("%s\x00%d\x00", s.Remote, s.Generation)
		if s.SessionIDDigest != nil {
			key += *s.SessionIDDigest
		}
		seen[key] = true
	}
	return len(seen)
}
