package main

import (
	"bufio"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

func (a *app) auditCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Export a run's hash-chained log, and verify an export offline",
		Example: `  agentctl audit export run-0190c3f2-... -o run.audit.jsonl
  agentctl audit verify run.audit.jsonl`,
	}
	var file string
	export := &cobra.Command{
		Use:   "export RUN_ID",
		Short: "Write a run's events as JSON Lines: a header, then one line per event as stored",
		Long: `Writes a header line {format: "agentctl.audit/v1", runId, workflowDigest, eventCount, finalHash}
and then one line per event {run_id, seq, stream, type, created_at, payload, prev_hash, hash}, the
payload exactly as stored (an encrypted envelope stays encrypted). No key is needed.
A replay's export holds the replay's own chain; the recorded frames it answered from stay in the
run that recorded them, named by its replay.frames events (run, seq spans, hash of the last frame):
export that run too to verify them.`,
		Example: `  agentctl audit export run-0190c3f2-... -o run.audit.jsonl
  agentctl audit export run-0190c3f2-... > run.audit.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				id, err := projector.ResolveRun(cmd.Context(), db, args[0])
				if err != nil {
					return err
				}
				w, done := io.Writer(a.stdout), func() error { return nil }
				if file != "" && file != "-" {
					f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
					if err != nil {
						return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("--file %q: %w", file, err)}
					}
					bw := bufio.NewWriter(f)
					w, done = bw, func() error {
						if err := bw.Flush(); err != nil {
							_ = f.Close()
							return err
						}
						return f.Close()
					}
				}
				h, err := db.Export(cmd.Context(), w, id)
				if err != nil {
					_ = done()
					return err
				}
				if err := done(); err != nil {
					return &events.Error{Op: "write audit file", Path: file, Err: err}
				}
				if file != "" && file != "-" {
					fmt.Fprintf(a.stderr, "exported %d events of %s to %s (final hash %s)\n", h.EventCount, h.RunID, file, h.FinalHash)
				}
				return nil
			})
		},
	}
	export.Flags().StringVarP(&file, "out", "o", "", "write to this file instead of stdout")
	export.Flags().StringVar(&file, "file", "", "same as -o")
	verify := &cobra.Command{
		Use:   "verify FILE",
		Short: "Recompute an audit export's hash chain offline; exit 0 with the count, or name the first bad seq",
		Example: `  agentctl audit verify run.audit.jsonl
  agentctl audit verify - < run.audit.jsonl --output json`,
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var r io.Reader = os.Stdin
			if args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return usageErr("audit file %q: %w", args[0], err)
				}
				defer f.Close()
				r = f
			}
			n, h, err := events.VerifyStream(r)
			if err != nil {
				return &exitError{code: workflow.ExitFailed, err: fmt.Errorf("audit verify %s: %w", args[0], err)}
			}
			data := map[string]any{"file": args[0], "runId": h.RunID, "events": n, "finalHash": h.FinalHash, "workflowDigest": h.WorkflowDigest}
			if a.output != "human" {
				return a.printJSON(a.stdout, "AuditVerify", true, data)
			}
			fmt.Fprintf(a.stdout, "ok: %d events of %s verified (final hash %s)\n", n, clean(h.RunID), h.FinalHash)
			return nil
		},
	}
	cmd.AddCommand(export, verify)
	return cmd
}
