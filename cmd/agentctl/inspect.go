package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

// autoVerifyBelow: inspect --output json verifies the chain of runs with
// fewer events than this without being asked (a recompute of ~100k hashes
// stays well under a second).
const autoVerifyBelow = 100_000

// inspected is the inspect document with what was verified: chainVerified
// is null when the chain was not checked (human output without --verify,
// or a run of 100k events or more), projectionVerified null without
// --verify.
type inspected struct {
	*projector.Document
	ChainVerified      *bool                `json:"chainVerified"`
	ChainVersion       string               `json:"chainVersion,omitempty"`
	ChainError         string               `json:"chainError,omitempty"`
	ProjectionVerified *bool                `json:"projectionVerified"`
	ProjectionMismatch []projector.Mismatch `json:"projectionMismatch,omitempty"`
}

func (a *app) inspectCmd() *cobra.Command {
	var html htmlFlags
	var verify bool
	cmd := &cobra.Command{
		Use:   "inspect RUN_ID",
		Short: "Show a run: tasks, protocol sessions, calls and stream events, from the log",
		Long: `Shows a run from its projection rows and its log. --verify recomputes the run's hash chain
(chainVerified) and recomputes every projection row it prints from the log, in a transaction
that is rolled back (projectionVerified); --output json verifies the chain of runs under 100,000
events without being asked. A broken chain or a projection that differs from the log is printed,
then reported as a storage error (exit 5) naming the first bad seq or the table.`,
		Example: `  agentctl inspect run-0190c3f2-...
  agentctl inspect run-0190c3f2-... --verify
  agentctl inspect run-0190c3f2-... --output json | jq .data.protocolCalls`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if html.on || html.out != "" {
				return a.inspectHTML(cmd.Context(), args[0], html)
			}
			ctx := cmd.Context()
			return a.withExistingDB(ctx, func(db *events.DB) error {
				doc, err := projector.Inspect(ctx, db, args[0])
				if err != nil {
					return err
				}
				out := inspected{Document: doc}
				var problem error
				if verify || (a.output != "human" && doc.Run.Events < autoVerifyBelow) {
					rc, err := db.VerifyRunChain(ctx, args[0])
					var ce *events.ChainError
					switch {
					case errors.As(err, &ce):
						out.ChainVerified, out.ChainError = boolPtr(false), fmt.Sprintf("seq %d: %s", ce.Seq, ce.Reason)
						problem = &events.Error{Op: "inspect " + args[0], Path: db.Path(), Err: err}
					case err != nil:
						return err
					default:
						out.ChainVerified = boolPtr(true)
					}
					out.ChainVersion = rc.Chain
				}
				if verify {
					mm, err := projector.VerifyProjection(ctx, db, args[0])
					if err != nil {
						return err
					}
					out.ProjectionVerified, out.ProjectionMismatch = boolPtr(len(mm) == 0), mm
					if len(mm) > 0 && problem == nil {
						problem = &events.Error{Op: "inspect " + args[0], Path: db.Path(), Err: fmt.Errorf("projection differs from the log: %s", mm[0])}
					}
				}
				if a.output != "human" {
					if err := a.printJSON(a.stdout, "Inspect", problem == nil, out); err != nil {
						return err
					}
					return problem
				}
				printInspect(a.stdout, doc)
				printVerified(a.stdout, out)
				return problem
			})
		},
	}
	cmd.Flags().BoolVar(&verify, "verify", false, "recompute the run's hash chain and every projection row shown from the log")
	html.add(cmd)
	return cmd
}

func boolPtr(b bool) *bool { return &b }

// printVerified writes the chain and projection lines of human inspect.
func printVerified(w io.Writer, v inspected) {
	switch {
	case v.ChainVerified == nil:
		fmt.Fprintln(w, "\nchain     not verified (pass --verify)")
	case *v.ChainVerified:
		fmt.Fprintf(w, "\nchain     verified (%s)\n", v.ChainVersion)
	default:
		fmt.Fprintf(w, "\nchain     BROKEN at %s\n", clean(v.ChainError))
	}
	switch {
	case v.ProjectionVerified == nil:
	case *v.ProjectionVerified:
		fmt.Fprintln(w, "projection matches the log")
	default:
		for _, m := range v.ProjectionMismatch {
			fmt.Fprintf(w, "projection DIFFERS from the log: %s\n", clean(m.String()))
		}
	}
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
