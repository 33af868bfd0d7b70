package replay

import (
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/workflow"
)

// A replay reproduces its source's final outcome, recoveries included. A
// source interrupted (Ctrl-C, a crash), reconciled by an operator and
// resumed continued its tasks after their first ending: a verdict on an
// uncertain call (call.reconciled), then, after run.resumed, the attempt
// finished again with the reconciled result (applied) or a new attempt
// (not applied; a call cancelled before anything ran; resume
// --retry-failed). A replay is never interrupted, reconciled or resumed:
// where its task attempt ends as the source's first did, it records the
// same verdict on its own call and continues as the resume did, so that
// it ends as the source ended, and never suggests settling a call that is
// already settled.

// recAttempt is what the source did with one task attempt once it ended.
type recAttempt struct {
	// verdict is the operator's reconcile of the attempt's call; nil when
	// there is none.
	verdict *vocab.CallReconciled
	// settled: a task.finished of the attempt followed the verdict (a
	// resume finished the attempt with the reconciled result).
	settled bool
}

// attempt is the record of task taskID's attempt n, created on first use.
func (src *replaySource) attempt(taskID string, n int) *recAttempt {
	if src.attempts == nil {
		src.attempts, src.lastAttempt = map[callKey]*recAttempt{}, map[string]int{}
	}
	k := callKey{task: taskID, attempt: n}
	a := src.attempts[k]
	if a == nil {
		a = &recAttempt{}
		src.attempts[k] = a
	}
	return a
}

// taskStarted notes the highest attempt of each task the source started.
func (ix *indexer) taskStarted(e events.Event) error {
	p, err := vocab.Decode[vocab.TaskStarted](e)
	if err != nil {
		return err
	}
	ix.src.attempt(p.TaskID, p.Attempt)
	if p.Attempt > ix.src.lastAttempt[p.TaskID] {
		ix.src.lastAttempt[p.TaskID] = p.Attempt
	}
	return nil
}

// callReconciled notes an operator's verdict on a recorded call.
func (ix *indexer) callReconciled(e events.Event) error {
	p, err := vocab.Decode[vocab.CallReconciled](e)
	if err != nil {
		return err
	}
	c := ix.src.byEffect[p.EffectID]
	if c == nil {
		return fmt.Errorf("reconcile of unknown call %s", p.EffectID)
	}
	a := ix.src.attempt(c.prepared.TaskID, c.prepared.Attempt)
	a.verdict, a.settled = &p, false
	return nil
}

// attemptFinished marks a verdict the resume acted on: the attempt it
// concerns finished again after it.
func (ix *indexer) attemptFinished(p vocab.TaskFinished) {
	if a := ix.src.attempt(p.TaskID, p.Attempt); a.verdict != nil {
		a.settled = true
	}
}

// SourceAttempt is what the source did with attempt n of taskID once it
// ended (workflow.ReplaySource).
func (d *Dialer) SourceAttempt(taskID string, n int) workflow.SourceAttempt {
	src := d.src
	out := workflow.SourceAttempt{NextStarted: src.lastAttempt[taskID] > n}
	if a := src.attempts[callKey{task: taskID, attempt: n}]; a != nil {
		out.Verdict, out.Settled = a.verdict, a.settled
	}
	return out
}

// SourceRunID is the run whose evidence answers (workflow.ReplaySource).
func (d *Dialer) SourceRunID() string { return d.src.runID }

var _ workflow.ReplaySource = (*Dialer)(nil)
