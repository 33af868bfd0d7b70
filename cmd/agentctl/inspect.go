package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

// autoVerifyBelow: inspect verifies the chain of runs with fewer events
// than this without being asked, in every output (a recompute of ~100k
// hashes stays well under a second); --verify adds the projection check.
const autoVerifyBelow = 100_000

// inspected is the inspect document with what was verified: chainVerified
// is null when the chain was not checked (a run of 100k events or more
// without --verify), projectionVerified null without --verify.
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
		Long: `Shows a run from its projection rows and its log: its outputs, tasks with their durations,
one row per protocol session, and each call with its frames at times relative to the run's
start. The run's hash chain is recomputed (chainVerified) for runs under 100,000 events, in
every output; --verify recomputes it whatever the size and also recomputes every projection row
it prints from the log, in a transaction that is rolled back (projectionVerified). A run
recorded running that no process writes any more (killed: its lock is free, or its lease
expired) is shown interrupted, with the command that carries it on. A broken chain or a projection that differs from the log is printed,
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
				if doc.Run.State, err = liveState(ctx, db, id, doc.Run.State); err != nil {
					return err
				}
				out := inspected{Document: doc}
				var problem error
				if verify || doc.Run.Events < autoVerifyBelow {
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
				for _, c := range nextCommands(id, doc.Run.Mode, doc.Run.State, uncertainCalls(doc.ProtocolCalls)) {
					fmt.Fprintf(a.stdout, "next: %s\n", c)
				}
				return problem
			})
		},
	}
	cmd.Flags().BoolVar(&verify, "verify", false, "also recompute every projection row shown from the log (and the chain of a run of 100,000 events or more)")
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print the run's events as they commit, until it ends (one line each; an Event envelope each in json and jsonl)")
	html.add(cmd)
	return cmd
}

func boolPtr(b bool) *bool { return &b }

// printVerified writes the chain and projection lines of human inspect.
func printVerified(w io.Writer, v inspected) {
	switch {
	case v.ChainVerified == nil:
		fmt.Fprintf(w, "\nchain     not verified (%d events or more: pass --verify)\n", autoVerifyBelow)
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
