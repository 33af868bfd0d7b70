package replay

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
)

// callKey is a call's position in a run: task, attempt, ordinal.
type callKey struct {
	task             string
	attempt, ordinal int
}

type recSession struct {
	opened  *vocab.SessionOpened
	connect frameRefs // frames up to session.opened
	list    frameRefs // frames after it (tools/list)
	catalog *vocab.SessionCatalog
	failure *sessionFail // why initialize or tools/list failed; nil if unknown
	// toolCallTasks: its initialize result advertised task-augmented
	// tools/call (read from the recorded response frame).
	toolCallTasks bool
	// abandoned: the process ended before the session was ready (its
	// catalog), and resume opened another; or resume opened it only to
	// ask about a task (taskPoll). A replay skips it.
	abandoned bool
	// relists are the tools/list sent again after
	// notifications/tools/list_changed, in order; listMark is where the
	// frames after the latest catalog start in list.
	relists  []relist
	listMark [2]int64 // len(list.spans), list.count
}

// relist is one recorded tools/list after notifications/tools/list_changed.
type relist struct {
	refs    frameRefs
	catalog *vocab.SessionCatalog
}

// sessionFail is a recorded failure to open a session or list its tools:
// the message and, where the log has it, the transport error's kind,
// status and code. An empty kind (a log written before task.finished
// carried errorKind) is guessed from the run's exit code.
type sessionFail struct {
	msg          string
	kind         transport.Kind
	status, code int
}

// frameRefs is where a group of recorded frames is: inclusive seq spans of
// one run's frame events. A replay records the reference, not the frames.
type frameRefs struct {
	run      string
	spans    [][2]int64
	count    int64
	lastHash string
}

// add appends the frame event at seq of run (its hash is read when the
// reference is recorded: only the last one's is kept).
func (r *frameRefs) add(run string, seq int64) error {
	return r.addSpans(run, [][2]int64{{seq, seq}}, 1, "")
}

// addSpans appends spans of run, merging a span that continues the last.
func (r *frameRefs) addSpans(run string, spans [][2]int64, count int64, lastHash string) error {
	if r.run == "" {
		r.run = run
	} else if r.run != run {
		return fmt.Errorf("frames of one group in runs %s and %s", r.run, run)
	}
	for _, sp := range spans {
		if n := len(r.spans); n > 0 && r.spans[n-1][1]+1 == sp[0] {
			r.spans[n-1][1] = sp[1]
		} else {
			r.spans = append(r.spans, sp)
		}
	}
	r.count += count
	r.lastHash = lastHash
	return nil
}

type recSend struct {
	// refs are the frames of this send; they stay where they are.
	refs frameRefs
	// responses are its "in" response frames, which rebuild the result.
	responses []vocab.Frame
	result    *vocab.CallResult
	callErr   *vocab.CallError
	trigger   string // the transition fired on callErr
	// task is the MCP task that answered this send (task_index.go);
	// the send's outcome is then its CreateTaskResult.
	task *recTask
	// interrupted: the process ended with this send's outcome unknown
	// (run.resumed followed); resume's first transition is its outcome.
	interrupted bool
	// inputRequired: the send was answered by an input-required result
	// (2026-07-28): input_requested followed its response.
	inputRequired bool
}

type recCall struct {
	prepared vocab.CallPrepared
	sends    []*recSend
	next     int
	// lastErr is the call.error recorded since the call's latest
	// transition, whether or not it is a send's outcome: a failed
	// reconnect records its error just before reconnect_failed.
	lastErr *vocab.CallError
}

// replaySource is the index of a recorded run that a replay answers from.
type replaySource struct {
	db       *events.DB // the source run's log, where frames are read back
	runID    string
	created  vocab.RunCreated
	inputs   map[string]any
	exitCode int
	sessions map[string][]*recSession // remote → by generation-1
	calls    map[callKey]*recCall
	byEffect map[string]*recCall
	gens     map[string]int // Connects so far per remote
	current  *recCall       // the call the run loop expects to make next
	curKey   callKey
	// tasks are the recorded tasks a replay has been answered with, by
	// remote and task id: their requests are answered from their steps.
	tasks map[string]*recTask
	// attempts (ordinal 0) and lastAttempt are how the source continued
	// its tasks after an attempt ended (replay_follow.go).
	attempts    map[callKey]*recAttempt
	lastAttempt map[string]int
}

func loadReplaySource(ctx context.Context, db *events.DB, runID string) (*replaySource, error) {
	ix := &indexer{ctx: ctx, intact: map[string]bool{}, states: projector.Calls{}, src: &replaySource{db: db, runID: runID, sessions: map[string][]*recSession{},
		calls: map[callKey]*recCall{}, byEffect: map[string]*recCall{}, gens: map[string]int{}, tasks: map[string]*recTask{}}}
	if err := ix.requireIntact(runID); err != nil {
		return nil, err
	}
	seen := false
	// Scanned, not loaded: only the index (the frames to replay) stays in memory.
	var stop error // why fn stopped the scan, returned as is
	err := db.ScanPayloads(ctx, runID, func(e events.Event) error {
		if !seen && e.Type != vocab.TypeRunCreated {
			stop = fmt.Errorf("%w %q", projector.ErrUnknownRun, runID)
			return stop
		}
		seen = true
		if err := ix.index(e); err != nil {
			stop = fmt.Errorf("replay %s: index seq %d (%s): %w", runID, e.Seq, e.Type, err)
			return stop
		}
		return nil
	})
	switch {
	case stop != nil:
		return nil, stop
	case err != nil:
		return nil, fmt.Errorf("replay %s: %w", runID, err)
	case !seen:
		return nil, fmt.Errorf("%w %q", projector.ErrUnknownRun, runID)
	}
	if !ix.finished {
		return nil, fmt.Errorf("replay %s: %w (no run.finished; resume or reconcile it first)", runID, workflow.ErrRunNotFinished)
	}
	return ix.src, nil
}

// session is the recorded session (remote, gen), created on first mention.
func (src *replaySource) session(remote string, gen int) *recSession {
	for len(src.sessions[remote]) < gen {
		src.sessions[remote] = append(src.sessions[remote], &recSession{})
	}
	return src.sessions[remote][gen-1]
}

// sendOf is the send of call effectID that frames now belong to.
func (src *replaySource) sendOf(effectID string) (*recSend, error) {
	c := src.byEffect[effectID]
	if c == nil || len(c.sends) == 0 {
		return nil, fmt.Errorf("frame of call %s outside any send", effectID)
	}
	return c.sends[len(c.sends)-1], nil
}

// lastSend is call effectID's latest send, nil if it has none.
func (src *replaySource) lastSend(effectID string) *recSend {
	c := src.byEffect[effectID]
	if c == nil || len(c.sends) == 0 {
		return nil
	}
	return c.sends[len(c.sends)-1]
}

// expect makes k the call the next CallTool must match and returns the
// recorded call at k (nil if the source made none there).
func (src *replaySource) expect(k callKey) *recCall {
	src.curKey = k
	src.current = src.calls[k]
	return src.current
}

// indexer reads a source run's events, in log order, into a replaySource:
// one method per event type (see indexers); what it must remember between
// events is in its fields.
type indexer struct {
	ctx      context.Context
	src      *replaySource
	finished bool // run.finished was seen
	// intact are the runs whose chain was verified (the source, and every
	// run a replay.frames reference names): evidence is read only from them.
	intact map[string]bool
	// unsettled are the sessions that have not reached session.catalog:
	// the next recorded failure (task.finished, a failed reconnect,
	// run.finished) is theirs.
	unsettled []*recSession
	// states rebuilds each call's machine from the facts (checked moves).
	states projector.Calls
}

// indexers maps an event type to the indexer method that reads it; frame
// events (vocab.FramePrefix + kind) go to frame. Other types carry
// nothing a replay answers from.
var indexers = map[string]func(*indexer, events.Event) error{
	vocab.TypeRunCreated:     (*indexer).runCreated,
	vocab.TypeRunFinished:    (*indexer).runFinished,
	vocab.TypeTaskFinished:   (*indexer).taskFinished,
	vocab.TypeReplayFrames:   (*indexer).replayFrames,
	vocab.TypeSessionOpened:  (*indexer).sessionOpened,
	vocab.TypeSessionCatalog: (*indexer).sessionCatalog,
	vocab.TypeCallPrepared:   (*indexer).callPrepared,
	vocab.TypeCallTransition: (*indexer).callTransition,
	vocab.TypeCallResult:     (*indexer).callResult,
	vocab.TypeCallError:      (*indexer).callError,
	vocab.TypeRunResumed:     (*indexer).runResumed,
	vocab.TypeTaskStarted:    (*indexer).taskStarted,
	vocab.TypeCallReconciled: (*indexer).callReconciled,

	vocab.TypeCallTaskAccepted: (*indexer).callTaskAccepted,
	vocab.TypeCallTaskStatus:   (*indexer).callTaskStatus,
	vocab.TypeCallTaskCancel:   (*indexer).callTaskCancel,
}

// index reads one event.
// A move to dispatched or redispatched rides on the request it lets go out
// (or a replay's replay.frames): it is read before the fact. Any other
// move rides on the fact that caused it (a response, call.error, ...):
// read after it.
func (ix *indexer) index(e events.Event) error {
	t, moved, err := vocab.EventMove(e)
	if err != nil {
		return err
	}
	forward := moved && e.Type != vocab.TypeCallTransition && (t.To == string(fsm.Dispatched) || t.To == string(fsm.Redispatched))
	if moved && forward {
		if err := ix.factMove(e, t); err != nil {
			return err
		}
	}
	if h := indexers[e.Type]; h != nil {
		if err := h(ix, e); err != nil {
			return err
		}
	} else if vocab.IsFrame(e.Type) {
		if err := ix.frame(e); err != nil {
			return err
		}
	}
	if moved && !forward && e.Type != vocab.TypeCallTransition {
		return ix.factMove(e, t)
	}
	return nil
}

// factMove folds the move t that e carries as a call.transition.
func (ix *indexer) factMove(e events.Event, t vocab.CallTransition) error {
	t, err := ix.states.Move(e, t)
	if err != nil {
		return err
	}
	return ix.callMove(t)
}

// fail gives f to every unsettled session that has no failure yet.
func (ix *indexer) fail(f sessionFail) {
	for _, s := range ix.unsettled {
		if s.failure == nil {
			f := f
			s.failure = &f
		}
	}
	ix.unsettled = nil
}

// unsettle marks s as not yet settled (once).
func (ix *indexer) unsettle(s *recSession) {
	for _, x := range ix.unsettled {
		if x == s {
			return
		}
	}
	ix.unsettled = append(ix.unsettled, s)
}

// sessionFrames is where a session frame of (remote, gen) goes: before
// session.opened (initialize) or after it (tools/list).
func (ix *indexer) sessionFrames(remote string, gen int) *frameRefs {
	s := ix.src.session(remote, gen)
	if s.opened == nil {
		ix.unsettle(s)
		return &s.connect
	}
	return &s.list
}

func (ix *indexer) runCreated(e events.Event) error {
	src := ix.src
	created, err := vocab.DecodeNumbers[vocab.RunCreated](e) // inputs keep their numbers exactly as recorded
	if err != nil {
		return fmt.Errorf("decode run.created: %w", err)
	}
	src.created = created
	src.inputs = src.created.Inputs
	return nil
}

func (ix *indexer) runFinished(e events.Event) error {
	p, err := vocab.Decode[vocab.RunFinished](e)
	if err != nil {
		return err
	}
	ix.finished, ix.src.exitCode = true, p.ExitCode
	ix.fail(sessionFail{msg: p.Error})
	return nil
}

func (ix *indexer) taskFinished(e events.Event) error {
	p, err := vocab.Decode[vocab.TaskFinished](e)
	if err != nil {
		return err
	}
	ix.fail(sessionFail{msg: p.Error, kind: transport.Kind(p.ErrorKind)})
	ix.attemptFinished(p)
	return nil
}

// frame references a frame where it is (no copy of its body is kept),
// unless it is a response, which rebuilds the call's result.
func (ix *indexer) frame(e events.Event) error {
	src := ix.src
	f, err := vocab.DecodeFrameHeader(e)
	if err != nil {
		return err
	}
	if f.EffectID == "" {
		if err := ix.initializeResult(f, e); err != nil {
			return err
		}
		return ix.sessionFrames(f.Remote, f.Generation).add(src.runID, e.Seq)
	}
	s, err := src.sendOf(f.EffectID)
	if err != nil {
		return err
	}
	if s.task != nil {
		return ix.taskFrame(s.task, e, f)
	}
	if f.Dir == "in" && f.Kind == "response" {
		if f, err = vocab.DecodeFrame(e); err != nil {
			return err
		}
		s.responses = append(s.responses, f)
	}
	return s.refs.add(src.runID, e.Seq)
}

// replayFrames reads a replay's reference to frames: the source is itself
// a replay, and its frames are in the run the reference names.
func (ix *indexer) replayFrames(e events.Event) error {
	src := ix.src
	r, err := vocab.Decode[vocab.ReplayFrames](e)
	if err != nil {
		return err
	}
	if err := ix.requireIntact(r.SourceRunID); err != nil {
		return err
	}
	if r.EffectID == "" {
		if s := src.session(r.Remote, r.Generation); s.opened == nil {
			for _, sp := range r.Spans {
				err := src.db.ScanRange(ix.ctx, r.SourceRunID, sp[0], sp[1], func(fe events.Event) error {
					h, err := vocab.DecodeFrameHeader(fe)
					if err != nil {
						return err
					}
					h.Remote, h.Generation = r.Remote, r.Generation
					return ix.initializeResult(h, fe)
				})
				if err != nil {
					return err
				}
			}
		}
		return ix.sessionFrames(r.Remote, r.Generation).addSpans(r.SourceRunID, r.Spans, r.Count, r.LastHash)
	}
	s, err := src.sendOf(r.EffectID)
	if err != nil {
		return err
	}
	if s.task != nil {
		return ix.taskRefs(s.task, r)
	}
	for _, sp := range r.Spans {
		err := src.db.ScanRange(ix.ctx, r.SourceRunID, sp[0], sp[1], func(fe events.Event) error {
			h, err := vocab.DecodeFrameHeader(fe)
			if err != nil || h.Dir != "in" || h.Kind != "response" {
				return err
			}
			f, err := vocab.DecodeFrame(fe)
			if err == nil {
				s.responses = append(s.responses, f)
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	return s.refs.addSpans(r.SourceRunID, r.Spans, r.Count, r.LastHash)
}

// requireIntact verifies runID's chain once: a replay answers only from
// evidence that recomputes (events.RequireIntact: exit 5 naming the seq).
func (ix *indexer) requireIntact(runID string) error {
	if ix.intact[runID] {
		return nil
	}
	if err := ix.src.db.RequireIntact(ix.ctx, runID); err != nil {
		if errors.Is(err, events.ErrNoRun) {
			return fmt.Errorf("%w %q", projector.ErrUnknownRun, runID)
		}
		return err
	}
	ix.intact[runID] = true
	return nil
}

func (ix *indexer) sessionOpened(e events.Event) error {
	p, err := vocab.Decode[vocab.SessionOpened](e)
	if err != nil {
		return err
	}
	s := ix.src.session(p.Remote, p.Generation)
	s.opened = &p
	if p.BorrowedFrom != nil { // no initialize frames here: what they said is copied
		s.toolCallTasks = p.BorrowedFrom.ToolCallTasks
	}
	ix.unsettle(s) // until its catalog arrives
	if p.TaskPoll {
		s.abandoned = true // only the source's resume needed it
	}
	return nil
}

func (ix *indexer) sessionCatalog(e events.Event) error {
	p, err := vocab.Decode[vocab.SessionCatalog](e)
	if err != nil {
		return err
	}
	s := ix.src.session(p.Remote, p.Generation)
	if s.catalog == nil {
		s.catalog = &p
	} else { // a relist: its frames are those since the latest catalog
		n, c := int(s.listMark[0]), s.listMark[1]
		r := relist{catalog: &p, refs: frameRefs{run: s.list.run, spans: slices.Clone(s.list.spans[n:]), count: s.list.count - c, lastHash: s.list.lastHash}}
		s.list.spans, s.list.count, s.list.lastHash = s.list.spans[:n], c, ""
		s.relists = append(s.relists, r)
	}
	s.listMark = [2]int64{int64(len(s.list.spans)), s.list.count}
	kept := ix.unsettled[:0]
	for _, x := range ix.unsettled {
		if x != s {
			kept = append(kept, x)
		}
	}
	ix.unsettled = kept
	return nil
}

func (ix *indexer) callPrepared(e events.Event) error {
	p, err := vocab.Decode[vocab.CallPrepared](e)
	if err != nil {
		return err
	}
	c := &recCall{prepared: p}
	ix.states.Prepared(p)
	ix.src.calls[callKey{p.TaskID, p.Attempt, p.Ordinal}] = c
	ix.src.byEffect[p.EffectID] = c
	return nil
}

func (ix *indexer) callTransition(e events.Event) error {
	p, err := vocab.Decode[vocab.CallTransition](e)
	if err != nil {
		return err
	}
	if p, err = ix.states.Move(e, p); err != nil {
		return err
	}
	return ix.callMove(p)
}

// callMove reads one transition of a recorded call.
func (ix *indexer) callMove(p vocab.CallTransition) error {
	c := ix.src.byEffect[p.EffectID]
	if c == nil {
		return fmt.Errorf("transition of unknown call %s", p.EffectID)
	}
	if n := len(c.sends); n > 0 && c.sends[n-1].interrupted && c.sends[n-1].callErr == nil && c.sends[n-1].result == nil &&
		(p.Trigger == string(fsm.FailAmbiguous) || p.Trigger == string(fsm.FailPossiblyExecuted)) {
		// Resume decided the interrupted send's fate: a replay, which is
		// not interrupted, fails there instead, as resume decided (a lost
		// connection, or possibly executed after a recorded 5xx).
		kind := string(transport.KindTransportLoss)
		if p.Trigger == string(fsm.FailPossiblyExecuted) {
			kind = "interrupted"
		}
		c.sends[n-1].callErr = &vocab.CallError{EffectID: p.EffectID, Kind: kind, Message: p.Reason}
	}
	if n := len(c.sends); n > 0 && c.sends[n-1].callErr != nil && c.sends[n-1].trigger == "" {
		c.sends[n-1].trigger = p.Trigger
	}
	if n := len(c.sends); n > 0 && p.Trigger == string(fsm.InputRequested) && c.sends[n-1].callErr == nil && c.sends[n-1].result == nil {
		c.sends[n-1].inputRequired = true
	}
	if t := ix.src.taskOf(p.EffectID); t != nil {
		t.taskTransition(p.Trigger)
	}
	if p.Trigger == string(fsm.ReconnectFailed) {
		// The reconnect's error was recorded (call.error) just before; the
		// transition's reason says it with the trigger in front.
		f := sessionFail{msg: p.Reason}
		if ce := c.lastErr; ce != nil {
			f = sessionFail{msg: ce.Message, kind: transport.Kind(ce.Kind), status: ce.Status, code: ce.Code}
		}
		ix.fail(f)
	}
	if p.To == string(fsm.Dispatched) || p.To == string(fsm.Redispatched) {
		c.sends = append(c.sends, &recSend{})
	}
	c.lastErr = nil
	return nil
}

func (ix *indexer) callResult(e events.Event) error {
	p, err := vocab.Decode[vocab.CallResult](e)
	if err != nil {
		return err
	}
	if t := ix.src.taskOf(p.EffectID); t != nil {
		t.taskResult(&p)
		return nil
	}
	if s := ix.src.lastSend(p.EffectID); s != nil && s.result == nil && s.callErr == nil {
		s.result = &p
	}
	return nil
}

func (ix *indexer) callError(e events.Event) error {
	p, err := vocab.Decode[vocab.CallError](e)
	if err != nil {
		return err
	}
	if c := ix.src.byEffect[p.EffectID]; c != nil {
		c.lastErr = &p
	}
	if t := ix.src.taskOf(p.EffectID); t != nil {
		t.taskError(&p)
		return nil
	}
	if s := ix.src.lastSend(p.EffectID); s != nil && s.result == nil && s.callErr == nil {
		s.callErr = &p
	}
	return nil
}
