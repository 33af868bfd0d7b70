package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/internal/canonjson"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
)

// The verdicts an operator may give on an uncertain call.
const (
	// ReconcileApplied: the call did execute; its result (required) becomes
	// the task's output when the run is resumed.
	ReconcileApplied = "applied"
	// ReconcileNotApplied: the call did not execute; resume starts a new
	// task attempt (a new call identity and idempotency key).
	ReconcileNotApplied = "not-applied"
)

// UncertainError ends a run whose call may have executed and may not be
// sent again (docs/ARCHITECTURE.md, "uncertain"). Its message tells the operator how
// to settle it, in commands that work as printed; the run's exit code is
// ExitUncertain (ExitCancelled when the user stopped the run).
type UncertainError struct {
	// RunID and EffectID are where the call is settled: for a replay, the
	// source run and its recorded call (a replay is never resumed, and its
	// message then equals the source's).
	RunID    string
	EffectID string
	TaskID   string
	Server   string // the remote's name
	URL      string
	Err      error // why the call ended uncertain
	// Verdict, for a replay, is the operator's reconcile of the source's
	// call ("applied: REASON"): the call is settled, and no command is
	// printed (a replay is never reconciled or resumed).
	Verdict string
}

func (e *UncertainError) Error() string {
	if e.Verdict != "" {
		return fmt.Sprintf("call %s of task %s may have executed on %s (%s): %v\n", e.EffectID, e.TaskID, e.Server, e.URL, e.Err) +
			fmt.Sprintf("reconciled in run %s: %s", e.RunID, e.Verdict)
	}
	c := ReconcileCommands(e.RunID, e.EffectID)
	return fmt.Sprintf("call %s of task %s may have executed on %s (%s): %v\n", e.EffectID, e.TaskID, e.Server, e.URL, e.Err) +
		"check the server, then record what happened (fill in R.json and the reason):\n  " + c[0] + "\n  " + c[1] + "\nthen: " + c[2]
}

// ReconcileCommands are the commands that settle uncertain call effectID of
// run runID, as printed: the two verdicts (each needs a --reason), then the
// resume. The HTML report shows the same ones.
func ReconcileCommands(runID, effectID string) []string {
	return []string{
		"agentctl effects reconcile " + effectID + ` --status applied --reason "..." --result-file R.json`,
		"agentctl effects reconcile " + effectID + ` --status not-applied --reason "..."`,
		"agentctl resume " + runID,
	}
}

// Unwrap returns the failure that left the call uncertain.
func (e *UncertainError) Unwrap() error { return e.Err }

// uncertain wraps the failure that left c uncertain with the reconcile how-to.
func (c *call) uncertain(err error) error {
	ue := &UncertainError{RunID: c.rn.id, EffectID: c.effectID, TaskID: c.task.ID, Server: c.remote,
		URL: c.rn.wf.Spec.MCPServers[c.remote].Endpoint(), Err: err}
	if c.rs != nil {
		if rec, ok := c.rs.sess.(Recorded); ok {
			// The same call as at prepared: Expect names the recorded one.
			if src := rec.Expect(c.task.ID, c.attempt, 1); src != "" {
				ue.RunID, ue.EffectID = rec.SourceRunID(), src
			}
			if d, ok := c.rn.r.Dialer.(ReplaySource); ok {
				if v := d.SourceAttempt(c.task.ID, c.attempt).Verdict; v != nil {
					ue.Verdict = v.Status + ": " + v.Reason
				}
			}
		}
	}
	return ue
}

// uncertainOf builds the UncertainError of a call as recorded.
func (rn *run) uncertainOf(lc *loggedCall, err error) error {
	if err == nil {
		reason := string(lc.m.State)
		if n := len(lc.transitions); n > 0 {
			reason = lc.transitions[n-1].Reason
		}
		err = errors.New(reason)
	}
	return &UncertainError{RunID: rn.id, EffectID: lc.prep.EffectID, TaskID: lc.prep.TaskID, Server: lc.prep.Server,
		URL: rn.wf.Spec.MCPServers[lc.prep.Server].Endpoint(), Err: err}
}

// Reconciliation is an operator's verdict on one uncertain call.
type Reconciliation struct {
	EffectID string
	Status   string // ReconcileApplied or ReconcileNotApplied
	Reason   string // why the operator believes it; required
	// Result is the call's result when Status is ReconcileApplied (required
	// then, forbidden otherwise): the tool's structuredContent, validated
	// against the tool's outputSchema as recorded at prepared.
	Result json.RawMessage
}

// Reconciled is what Reconcile recorded.
type Reconciled struct {
	RunID      string         `json:"runId"`
	EffectID   string         `json:"effectId"`
	TaskID     string         `json:"taskId"`
	Status     string         `json:"status"`
	Transition fsm.Transition `json:"transition"`
	// StillUncertain are the run's other calls still uncertain: resume
	// refuses until they are reconciled too.
	StillUncertain []string `json:"stillUncertain"`
}

// Reconcile records an operator's verdict on an uncertain call: a
// call.reconciled event and the call.transition it causes (uncertain →
// succeeded or failed), appended to the call's run in one transaction.
// Afterwards `Resume` continues the run. A call that is not uncertain is
// refused, as is an applied verdict without a valid result; refusals are
// *Error with code ExitInvalid and record nothing.
func Reconcile(ctx context.Context, db *events.DB, rq Reconciliation) (*Reconciled, error) {
	invalid := func(format string, args ...any) error {
		return &Error{Code: ExitInvalid, Err: fmt.Errorf("reconcile %s: "+format, append([]any{rq.EffectID}, args...)...)}
	}
	trigger := fsm.ReconcileApplied
	switch rq.Status {
	case ReconcileApplied:
		if len(rq.Result) == 0 {
			return nil, invalid("--status applied needs the call's result (--result-file R.json)")
		}
		if !json.Valid(rq.Result) {
			return nil, invalid("result is not JSON")
		}
	case ReconcileNotApplied:
		trigger = fsm.ReconcileNotApplied
		if len(rq.Result) > 0 {
			return nil, invalid("a result makes no sense with --status not-applied")
		}
	default:
		return nil, invalid("status %q: want %s or %s", rq.Status, ReconcileApplied, ReconcileNotApplied)
	}
	if rq.Reason == "" {
		return nil, invalid("a reason is required (--reason)")
	}
	runID, err := projector.CallRunID(ctx, db, rq.EffectID)
	if err != nil {
		if errors.Is(err, projector.ErrUnknownCall) {
			return nil, invalid("%w", err)
		}
		return nil, err
	}
	l, err := loadRunLog(ctx, db, runID)
	if err != nil {
		return nil, err
	}
	lc := l.calls[rq.EffectID]
	if lc == nil {
		return nil, invalid("%w: not in the log of run %s", projector.ErrUnknownCall, runID)
	}
	if l.created.Mode == "replay" {
		return nil, &Error{RunID: runID, Code: ExitInvalid, Err: fmt.Errorf("reconcile %s: refused: run %s is a replay of %s, which is never resumed; "+
			"settle the source run's call instead (agentctl effects list %s)", rq.EffectID, runID, l.created.SourceRunID, l.created.SourceRunID)}
	}
	if lc.m.State != fsm.Uncertain {
		return nil, &Error{RunID: runID, Code: ExitInvalid,
			Err: fmt.Errorf("reconcile %s: refused: the call is %s, not uncertain; only an uncertain call can be reconciled", rq.EffectID, lc.m.State)}
	}
	rec := vocab.CallReconciled{EffectID: rq.EffectID, Status: rq.Status, Reason: rq.Reason}
	if rq.Status == ReconcileApplied {
		tool, ok := l.tool(lc)
		if !ok {
			return nil, fmt.Errorf("reconcile %s: tool %q is not in the recorded catalog", rq.EffectID, lc.prep.Tool)
		}
		if err := transport.ValidateOutput(tool, rq.Result); err != nil {
			return nil, invalid("result does not match the tool's outputSchema: %w", err)
		}
		canon, err := canonjson.Canonical(rq.Result)
		if err != nil {
			return nil, invalid("result: %w", err)
		}
		rec.Result, rec.ResultDigest = canon, canonjson.DigestBytes(canon)
	}
	next, tr, _, err := fsm.Fire(lc.m, trigger, rq.Reason)
	if err != nil {
		return nil, fmt.Errorf("reconcile %s: %w", rq.EffectID, err)
	}
	// The verdict carries the move it makes (no call.transition restates it).
	rec.Move = &vocab.Move{To: string(tr.To), Trigger: string(tr.Trigger), Reason: tr.Reason, Generation: lc.gen, Redispatches: next.Redispatches}
	recs := []events.Record{{Stream: "call/" + rq.EffectID, Type: vocab.TypeCallReconciled, Payload: rec}}
	if _, err := db.Append(ctx, runID, recs, projector.Apply); err != nil {
		return nil, err
	}
	still := []string{}
	for _, as := range l.attempts {
		if c := as[len(as)-1].call; c != nil && c != lc && c.m.State == fsm.Uncertain {
			still = append(still, c.prep.EffectID)
		}
	}
	sort.Strings(still)
	return &Reconciled{RunID: runID, EffectID: rq.EffectID, TaskID: lc.prep.TaskID, Status: rq.Status, Transition: tr, StillUncertain: still}, nil
}
