package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/projector/report"
	"github.com/agentctl/agentctl/workflow"
)

// htmlFlags are inspect's report flags: --html writes the self-contained
// HTML report instead of the summary.
type htmlFlags struct {
	on  bool
	out string
}

func (h *htmlFlags) add(cmd *cobra.Command) {
	cmd.Flags().BoolVar(&h.on, "html", false, "write a self-contained HTML report (timeline, calls and their state machines) instead of the summary")
	cmd.Flags().StringVarP(&h.out, "out", "o", "", `with --html: the file to write (default RUN_ID.html in the current directory; "-" for stdout)`)
	cmd.Example += `
  agentctl inspect run-0190c3f2-... --html            # writes run-0190c3f2-....html
  agentctl inspect run-0190c3f2-... --html -o - > r.html`
}

// inspectHTML writes the HTML report of runID where h says.
func (a *app) inspectHTML(ctx context.Context, runID string, h htmlFlags) error {
	if !h.on {
		return usageErr("-o/--out %q needs --html (inspect RUN --html -o FILE)", h.out)
	}
	return a.withExistingDB(ctx, func(db *events.DB) error {
		runID, err := projector.ResolveRun(ctx, db, runID)
		if err != nil {
			return err
		}
		r, err := report.Build(ctx, db, runID, report.Options{Reconcile: workflow.ReconcileCommands, RedispatchBudget: redispatchBudget})
		if err != nil {
			return err
		}
		if st, err := liveState(ctx, db, runID, r.Doc.Run.State); err != nil {
			return err
		} else if st != r.Doc.Run.State { // interrupted: no process writes it any more
			run := *r.Doc.Run
			run.State, r.Doc.Run = st, &run
		}
		return a.writeReport(r, h.out)
	})
}

// writeReport writes r to out: stdout for "-", RUN_ID.html here for "".
func (a *app) writeReport(r *report.Report, out string) error {
	if out == "-" {
		return report.Write(a.stdout, r)
	}
	if out == "" {
		out = r.Doc.Run.RunID + ".html"
	}
	f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return usageErr("-o: %w", err)
	}
	if err := report.Write(f, r); err != nil {
		_ = f.Close()
		return fmt.Errorf("write report %s: %w", out, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write report %s: %w", out, err)
	}
	runID := r.Doc.Run.RunID
	if a.output != "human" {
		return a.printJSON(a.stdout, "Report", true, map[string]any{"runId": runID, "path": out, "chainVerified": r.Chain.Verified})
	}
	fmt.Fprintf(a.stdout, "report %s (run %s, chain %s)\n", out, runID, map[bool]string{true: "verified", false: "NOT verified"}[r.Chain.Verified])
	return nil
}

// redispatchBudget is the state machine's resend budget for a call of the
// class idempotency.
func redispatchBudget(idempotency string) int {
	if fsm.Idempotency(idempotency).Redispatchable() {
		return fsm.RedispatchBudget
	}
	return 0
}
