package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

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
	var verify, follow bool
	cmd := &cobra.Command{
		Use:   "inspect RUN",
		Short: "Show a run: tasks, protocol sessions, calls and stream events, from the log",
		Long: `Shows a run from its projection rows and its log. --verify recomputes the run's hash chain
(chainVerified) and recomputes every projection row it prints from the log, in a transaction
that is rolled back (projectionVerified); --output json verifies the chain of runs under 100,000
events without being asked. A broken chain or a projection that differs from the log is printed,
then reported as a storage error (exit 5) naming the first bad seq or the table.`,
		Example: `  agentctl inspect run-0190c3f2-...
  agentctl inspect run-0190c3f2-... --verify
  agentctl inspect run-0190c3f2-... --output json | jq .data.protocolCalls
  agentctl inspect last --follow`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if html.on || html.out != "" {
				return a.inspectHTML(ctx, args[0], html)
			}
			return a.withExistingDB(ctx, func(db *events.DB) error {
				id, err := projector.ResolveRun(ctx, db, args[0])
				if err != nil {
					return err
				}
				if follow {
					return a.follow(ctx, db, id)
				}
				doc, err := projector.Inspect(ctx, db, id)
				if err != nil {
					return err
				}
				out := inspected{Document: doc}
				var problem error
				if verify || (a.output != "human" && doc.Run.Events < autoVerifyBelow) {
					rc, err := db.VerifyRunChain(ctx, id)
					var ce *events.ChainError
					switch {
					case errors.As(err, &ce):
						out.ChainVerified, out.ChainError = boolPtr(false), fmt.Sprintf("seq %d: %s", ce.Seq, ce.Reason)
						problem = &events.Error{Op: "inspect " + id, Path: db.Path(), Err: err}
					case err != nil:
						return err
					default:
						out.ChainVerified = boolPtr(true)
					}
					out.ChainVersion = rc.Chain
				}
				if verify {
					mm, err := projector.VerifyProjection(ctx, db, id)
					if err != nil {
						return err
					}
					out.ProjectionVerified, out.ProjectionMismatch = boolPtr(len(mm) == 0), mm
					if len(mm) > 0 && problem == nil {
						problem = &events.Error{Op: "inspect " + id, Path: db.Path(), Err: fmt.Errorf("projection differs from the log: %s", mm[0])}
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
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the run's events as they commit, until it ends (one line each; an Event envelope each in json and jsonl)")
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
