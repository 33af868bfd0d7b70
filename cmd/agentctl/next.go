package main

import (
	"context"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

// stateInterrupted is how a run recorded "running" is shown when no
// process writes it any more (killed, or its machine lost): on SQLite its
// run lock on the database file is free, on PostgreSQL its lease expired.
// It is derived when runs are listed or inspected, never recorded: the log
// says only what happened, and `agentctl resume` carries the run on.
const stateInterrupted = "interrupted"

// liveState is the state to show for a run recorded in state: a running
// run that no process holds is interrupted. When the probe cannot be made
// (a SQLite file this user may only read: its lock needs it opened for
// writing) the recorded state is shown; a command that only reads does not
// fail for it.
func liveState(ctx context.Context, db *events.DB, runID, state string) (string, error) {
	if state != "running" {
		return state, nil
	}
	held, err := db.RunHeld(ctx, runID)
	if err != nil {
		if ctx.Err() != nil {
			return "", err
		}
		return state, nil
	}
	if !held {
		return stateInterrupted, nil
	}
	return state, nil
}

// nextCommands are the commands that apply to a run that ended (or was
// interrupted) in state, as printed: a cancelled or interrupted run, or an
// uncertain one whose calls are all settled, resumes; a failed one resumes
// with --retry-failed; one with an uncertain call needs its calls settled
// first, which effects list shows. A replay or a check is never resumed:
// none.
func nextCommands(runID, mode, state string, uncertainCalls bool) []string {
	if mode == "replay" || mode == workflow.ModeCheck || strings.HasPrefix(runID, "replay-") {
		return nil
	}
	if uncertainCalls && state != workflow.StateSucceeded {
		return []string{"agentctl effects list " + runID}
	}
	switch state {
	case workflow.StateCancelled, stateInterrupted, workflow.StateUncertain: // uncertain: its calls all settled
		return []string{"agentctl resume " + runID}
	case workflow.StateFailed:
		return []string{"agentctl resume " + runID + " --retry-failed"}
	}
	return nil
}

// anyUncertain reports whether a task attempt of the run ended uncertain
// (right after the run ended: its call is uncertain, not reconciled yet).
func anyUncertain(tasks []projector.TaskView) bool {
	for _, t := range tasks {
		if t.State == workflow.StateUncertain {
			return true
		}
	}
	return false
}

// uncertainCalls reports whether a call of the run is still uncertain
// (not reconciled).
func uncertainCalls(calls []projector.CallView) bool {
	for _, c := range calls {
		if c.Status == workflow.StateUncertain {
			return true
		}
	}
	return false
}
