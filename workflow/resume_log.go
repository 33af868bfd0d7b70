package workflow

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
)

// runLog is what resume and reconcile need of a run, folded from its
// events alone: the workflow and inputs (run.created), every task attempt
// with its call, and the session generations already used.
type runLog struct {
	runID    string
	lastSeq  int64
	created  vocab.RunCreated
	finished *vocab.RunFinished // the last run.finished not followed by run.resumed
	attempts map[string][]*loggedAttempt
	calls    map[string]*loggedCall
	gens     map[string]int                           // highest generation per remote
	protos   map[string]string                        // remote → protocol version of its first session
	catalogs map[string]map[int]*vocab.SessionCatalog // remote → generation → tools/list
	// retryFailed: this resume gives failed tasks a new attempt.
	retryFailed bool
	states      projector.Calls // each call's machine, as its facts rebuild it
	outputs     vocab.Outputs   // restores the outputs the log stores once
}

// loggedAttempt is one task attempt as recorded.
type loggedAttempt struct {
	started  vocab.TaskStarted
	finished *vocab.TaskFinished // the last task.finished of the attempt
	call     *loggedCall
	// retry is the next attempt's schedule, recorded with this attempt's failure.
	retry *vocab.TaskRetryScheduled
}

// loggedCall is one call as recorded: its identity and arguments, its
// transitions (from which the machine is rebuilt), and its outcome.
type loggedCall struct {
	prep        vocab.CallPrepared
	transitions []fsm.Transition
	gen         int               // generation of the last transition (or of prepared)
	result      *vocab.CallResult // last call.result after the last send
	// possiblyExecuted is the HTTP status of a 5xx answer to the last send
	// (0 = none): the request may have run, so it is never sent again.
	possiblyExecuted int
	reconciled       *vocab.CallReconciled
	m                fsm.Call
	task             *loggedTask // the MCP task the call was made as (resume_task.go)
}

// loadRunLog reads runID's events and folds them; a run with no events
// wraps events.ErrNoRun.
func loadRunLog(ctx context.Context, db *events.DB, runID string) (*runLog, error) {
	l := &runLog{runID: runID, attempts: map[string][]*loggedAttempt{}, calls: map[string]*loggedCall{},
		gens: map[string]int{}, protos: map[string]string{}, catalogs: map[string]map[int]*vocab.SessionCatalog{}, states: projector.Calls{}}
	err := db.Scan(ctx, runID, 0, func(e events.Event) error {
		l.lastSeq = e.Seq
		return l.fold(e)
	})
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", runID, err)
	}
	if l.lastSeq == 0 {
		return nil, fmt.Errorf("%w: %s", events.ErrNoRun, runID)
	}
	for id, c := range l.calls {
		m, err := fsm.Rebuild(fsm.Idempotency(c.prep.Idempotency), c.transitions)
		if err != nil {
			return nil, fmt.Errorf("run %s: call %s: %w", runID, id, err)
		}
		c.m = m
	}
	return l, nil
}

func (l *runLog) fold(e events.Event) error {
	switch e.Type {
	case vocab.TypeRunCreated:
		created, err := vocab.Decode[vocab.RunCreated](e)
		l.created = created
		return err
	case vocab.TypeRunFinished:
		p, err := vocab.Decode[vocab.RunFinished](e)
		if err != nil {
			return err
		}
		l.finished = &p
	case vocab.TypeRunResumed:
		l.finished = nil
	case vocab.TypeTaskStarted:
		p, err := vocab.Decode[vocab.TaskStarted](e)
		if err != nil {
			return err
		}
		l.attempts[p.TaskID] = append(l.attempts[p.TaskID], &loggedAttempt{started: p})
	case vocab.TypeTaskFinished:
		p, err := vocab.Decode[vocab.TaskFinished](e)
		if err != nil {
			return err
		}
		if err := l.outputs.Finished(e, &p); err != nil {
			return err
		}
		if a := l.attempt(p.TaskID, p.Attempt); a != nil {
			a.finished = &p
		}
	case vocab.TypeTaskRetry:
		p, err := vocab.Decode[vocab.TaskRetryScheduled](e)
		if err != nil {
			return err
		}
		if a := l.attempt(p.TaskID, p.Attempt-1); a != nil {
			a.retry = &p
		}
	case vocab.TypeSessionOpened:
		p, err := vocab.Decode[vocab.SessionOpened](e)
		if err != nil {
			return err
		}
		l.gens[p.Remote] = max(l.gens[p.Remote], p.Generation)
		if l.protos[p.Remote] == "" && p.ProtocolVersion != "" {
			l.protos[p.Remote] = p.ProtocolVersion
		}
	case vocab.TypeSessionCatalog:
		p, err := vocab.Decode[vocab.SessionCatalog](e)
		if err != nil {
			return err
		}
		if l.catalogs[p.Remote] == nil {
			l.catalogs[p.Remote] = map[int]*vocab.SessionCatalog{}
		}
		l.catalogs[p.Remote][p.Generation] = &p
	default:
		return l.foldCall(e)
	}
	return nil
}

// foldCall folds the call events (and the moves frames carry).
func (l *runLog) foldCall(e events.Event) error {
	switch e.Type {
	case vocab.TypeCallPrepared:
		p, err := vocab.Decode[vocab.CallPrepared](e)
		if err != nil {
			return err
		}
		c := &loggedCall{prep: p, gen: p.Generation}
		l.calls[p.EffectID] = c
		l.outputs.Prepared(p)
		l.states.Prepared(p)
		if a := l.attempt(p.TaskID, p.Attempt); a != nil {
			a.call = c
		}
	case vocab.TypeCallTransition:
		p, err := vocab.Decode[vocab.CallTransition](e)
		if err != nil {
			return err
		}
		return l.move(e, p)
	case vocab.FramePrefix + "http_error":
		f, err := vocab.Decode[vocab.Frame](e)
		if err != nil {
			return err
		}
		if c := l.calls[f.EffectID]; c != nil && f.Method == "tools/call" && f.HTTPStatus >= 500 {
			c.possiblyExecuted = f.HTTPStatus
		}
	case vocab.TypeCallResult:
		p, err := vocab.Decode[vocab.CallResult](e)
		if err != nil {
			return err
		}
		if err := l.outputs.Result(e, &p); err != nil {
			return err
		}
		if c := l.calls[p.EffectID]; c != nil {
			c.result = &p
		}
		return l.move(e, p)
	case vocab.TypeCallTaskAccepted, vocab.TypeCallTaskStatus:
		return l.foldTask(e)
	case vocab.TypeCallReconciled:
		p, err := vocab.Decode[vocab.CallReconciled](e)
		if err != nil {
			return err
		}
		if c := l.calls[p.EffectID]; c != nil {
			c.reconciled = &p
		}
		return l.move(e, p)
	case vocab.TypeCallError, vocab.TypeCallTaskCancel, vocab.TypeReplayFrames:
		p, err := vocab.Payload(e)
		if err != nil {
			return err
		}
		return l.move(e, p)
	default:
		if vocab.IsFrame(e.Type) {
			l.outputs.Frame(e)
			return l.frameMove(e)
		}
	}
	return nil
}

// frameMove folds the move a request frame carries.
func (l *runLog) frameMove(e events.Event) error {
	m, err := vocab.FrameMove(e)
	if err != nil || m == nil {
		return err
	}
	f, err := vocab.DecodeFrameHeader(e)
	if err != nil {
		return err
	}
	return l.move(e, f)
}

// move folds the call transition the decoded payload p of e records (a
// fact's move, or a call.transition), checked against the machine.
func (l *runLog) move(e events.Event, p any) error {
	t, ok, err := l.states.Fact(e, p)
	if !ok || err != nil {
		return err
	}
	if c := l.calls[t.EffectID]; c != nil {
		c.transitions = append(c.transitions, fsm.Transition{From: fsm.State(t.From), To: fsm.State(t.To), Trigger: fsm.Trigger(t.Trigger), Reason: t.Reason})
		c.gen = t.Generation
		if t.To == string(fsm.Dispatched) || t.To == string(fsm.Redispatched) {
			c.result, c.possiblyExecuted = nil, 0 // an outcome belongs to the latest send
		}
	}
	return nil
}

func (l *runLog) attempt(taskID string, n int) *loggedAttempt {
	for _, a := range l.attempts[taskID] {
		if a.started.Attempt == n {
			return a
		}
	}
	return nil
}

// last returns the latest attempt of a task, or nil if it never started.
func (l *runLog) last(taskID string) *loggedAttempt {
	as := l.attempts[taskID]
	if len(as) == 0 {
		return nil
	}
	return as[len(as)-1]
}

// tool returns the call's tool as recorded in the catalog of the session
// the call was prepared on.
func (l *runLog) tool(c *loggedCall) (transport.Tool, bool) {
	cat := l.catalogs[c.prep.Server][c.prep.Generation]
	if cat == nil {
		return transport.Tool{}, false
	}
	for _, t := range cat.Tools {
		if t.Name == c.prep.Tool {
			// The recorded digest was computed on the schemas as received;
			// the recorded schemas may be redacted copies.
			return transport.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema,
				OutputSchema: t.OutputSchema, Annotations: t.Annotations, Execution: t.Execution}.WithDigest(t.Digest), true
		}
	}
	return transport.Tool{}, false
}
