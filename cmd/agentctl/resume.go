package main

import (
	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

func (a *app) resumeCmd() *cobra.Command {
	var retryFailed bool
	cmd := &cobra.Command{
		Use:   "resume RUN_ID [--retry-failed]",
		Short: "Continue a run from its log after a crash, Ctrl-C or a reconcile; --retry-failed picks up failed tasks",
		Long: `resume rebuilds every call of the run from the log and carries the run on, appending to the
same run. The run's chain is verified first: a log that does not recompute is refused (exit 5).
Completed calls are never sent again: their recorded result is used. A call that was
dispatched with no outcome in the log counts as an ambiguous failure: it is redispatched once
(new session, schema digest unchanged) only if its idempotency is pure, idempotent or keyed and
it was not redispatched before; otherwise it ends uncertain (exit 3).

A run that finished uncertain or cancelled (Ctrl-C) resumes once none of its calls is uncertain:
settle each with "agentctl effects reconcile" (applied: the recorded result becomes the task's
output; not-applied: the task gets a new attempt, with a new call identity and idempotency key).
A task stopped before anything was sent gets a new attempt.

--retry-failed also resumes a run that finished failed: every task whose last attempt failed
(a definitive failure) gets a new attempt; succeeded tasks keep their recorded output and are not
called again; uncertain calls still need a reconcile first. resume always uses the workflow
source and inputs recorded in the run: editing the workflow file in between is not supported
(the edit is ignored). A replay is never resumed.`,
		Example: `  agentctl resume run-0190c3f2-...
  agentctl effects reconcile 3f2a... --status not-applied --reason "no order in the shop" && agentctl resume run-0190c3f2-...
  agentctl resume run-0190c3f2-... --retry-failed`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				id, err := projector.ResolveRun(cmd.Context(), db, args[0])
				if err != nil {
					return err
				}
				// A login the run needs and the database lacks: exit 6
				// before anything is sent or recorded, as for run.
				if lr, err := workflow.RunMissingLogins(cmd.Context(), db, id); err != nil {
					return err
				} else if lr != nil {
					return &exitError{code: workflow.ExitRemote, err: lr}
				}
				res, err := a.runner(db).ResumeWith(cmd.Context(), id, workflow.ResumeOptions{RetryFailed: retryFailed})
				if err != nil {
					return err
				}
				return a.printResult(cmd.Context(), db, res)
			})
		},
	}
	cmd.Flags().BoolVar(&retryFailed, "retry-failed", false, "give every task that ended failed a new attempt (a failed run may then be resumed)")
	return cmd
}
