package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

func (a *app) effectsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "effects",
		Short: "List a run's calls (effects) and reconcile the ones left uncertain",
	}
	cmd.AddCommand(a.effectsListCmd(), a.effectsReconcileCmd())
	return cmd
}

// effectRow is one call as `effects list` shows it.
type effectRow struct {
	EffectID     string  `json:"effectId"`
	TaskID       string  `json:"taskId"`
	Attempt      int     `json:"attempt"`
	Server       string  `json:"server"`
	Tool         string  `json:"tool"`
	Idempotency  string  `json:"idempotency"`
	Status       string  `json:"status"`
	Generation   int     `json:"generation"`
	Redispatches int     `json:"redispatches"`
	Error        *string `json:"error"`
	Reconciled   *string `json:"reconciled"`
	Reason       *string `json:"reconcileReason"`
}

func (a *app) effectsListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list RUN_ID",
		Short:   "List the calls of a run with their status; uncertain ones need an operator",
		Example: `  agentctl effects list run-0190c3f2-... --output json`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			runID, rows, err := a.listEffects(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if a.output != "human" {
				return a.printJSON(a.stdout, "EffectList", true, map[string]any{"runId": runID, "effects": rows})
			}
			printEffects(a.stdout, rows)
			return nil
		},
	}
}

// listEffects resolves ref to a run and returns its id and its calls.
func (a *app) listEffects(ctx context.Context, ref string) (string, []effectRow, error) {
	var doc *projector.Document
	err := a.withExistingDB(ctx, func(db *events.DB) error {
		id, err := projector.ResolveRun(ctx, db, ref)
		if err != nil {
			return err
		}
		doc, err = projector.Inspect(ctx, db, id)
		return err
	})
	if err != nil {
		return "", nil, err
	}
	rec := map[string]projector.EffectView{}
	for _, e := range doc.Effects {
		rec[e.EffectID] = e
	}
	rows := make([]effectRow, 0, len(doc.ProtocolCalls))
	for _, c := range doc.ProtocolCalls {
		r := effectRow{EffectID: c.EffectID, TaskID: c.TaskID, Attempt: c.Attempt, Server: c.Server, Tool: c.Tool, Idempotency: c.Idempotency,
			Status: c.Status, Generation: c.Generation, Redispatches: c.Redispatches, Error: c.Error}
		if e, ok := rec[c.EffectID]; ok {
			r.Reconciled, r.Reason = &e.Status, &e.Reason
		}
		rows = append(rows, r)
	}
	return doc.Run.RunID, rows, nil
}

func (a *app) effectsReconcileCmd() *cobra.Command {
	var status, reason, resultFile string
	cmd := &cobra.Command{
		Use:   "reconcile CALL_ID --status applied|not-applied --reason TEXT [--result-file F]",
		Short: "Record an operator's verdict on an uncertain call, so that the run can be resumed",
		Long: `reconcile settles a call that ended uncertain (it may have executed and may not be sent again).
After checking the server yourself, say what happened:
  --status applied      the call executed; --result-file holds its result as the task's
                        output would have been, which the workflow then uses: for a tool with an
                        outputSchema, the structuredContent object (validated against it), e.g.
                          {"orderId": 17, "status": "created"}
                        for a text-only tool (no outputSchema), the content array, e.g.
                          [{"type": "text", "text": "order 17 created"}]
                        (templates then read tasks.ID.output[0].text)
  --status not-applied  the call did not execute; resume starts a new task attempt
                        (a new call identity and idempotency key)
Then run "agentctl resume RUN_ID" once no call of the run is uncertain. A call that is not
uncertain is refused, and so is a call of a replay (settle the source run's call).`,
		Example: `  agentctl effects reconcile 3f2a... --status applied --reason "order 17 exists" --result-file r.json
  agentctl effects reconcile 3f2a... --status not-applied --reason "no order in the shop"`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			rq := workflow.Reconciliation{Status: status, Reason: reason}
			if resultFile != "" {
				b, err := os.ReadFile(resultFile)
				if err != nil {
					return usageErr("--result-file: %w", err)
				}
				rq.Result = b
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				id, _, err := projector.ResolveEffect(cmd.Context(), db, args[0])
				if err != nil {
					return err
				}
				rq.EffectID = id
				rec, err := workflow.Reconcile(cmd.Context(), db, rq)
				if err != nil {
					return err
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "Reconciled", true, map[string]any{"runId": rec.RunID, "effectId": rec.EffectID, "taskId": rec.TaskID,
						"status": rec.Status, "transition": viewTransition(rec.Transition)})
				}
				fmt.Fprintf(a.stdout, "call %s of task %s reconciled %s (%s)\n", rec.EffectID, clean(rec.TaskID), rec.Status, rec.Transition)
				if len(rec.StillUncertain) > 0 {
					fmt.Fprintf(a.stdout, "run %s has %d more uncertain call(s); next, check the server, then:\n%s\n",
						rec.RunID, len(rec.StillUncertain), workflow.ReconcileHint(rec.StillUncertain[0]))
					return nil
				}
				fmt.Fprintf(a.stdout, "next: agentctl resume %s\n", rec.RunID)
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&status, "status", "", "applied or not-applied (required)")
	cmd.Flags().StringVar(&reason, "reason", "", "why you believe it (required; recorded)")
	cmd.Flags().StringVar(&resultFile, "result-file", "", "JSON file with the call's result (required with --status applied)")
	return cmd
}

// printEffects writes the calls table with a header row, its columns as
// wide as their widest cell; a reconciliation or an error follows its call.
func printEffects(w io.Writer, rows []effectRow) {
	t := table{head: []string{"CALL", "TASK", "ATTEMPT", "TOOL", "IDEMPOTENCY", "STATUS", "GEN", "REDISPATCHES"}}
	for _, r := range rows {
		var note string
		if r.Reconciled != nil {
			note = fmt.Sprintf("reconciled %s: %s", *r.Reconciled, clean(deref(r.Reason)))
		} else if r.Error != nil {
			note = clean(*r.Error)
		}
		t.add(note, r.EffectID, clean(r.TaskID), strconv.Itoa(r.Attempt), clean(r.Server)+"/"+clean(r.Tool), r.Idempotency, r.Status, strconv.Itoa(r.Generation), strconv.Itoa(r.Redispatches))
	}
	t.write(w, "")
}
