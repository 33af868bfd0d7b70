package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/internal/canonjson"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// Replay (DESIGN §9) re-runs a recorded workflow against its own evidence.
//
// The source run is indexed once: sessions by (remote, generation), calls by
// (task, attempt, ordinal), and each call's sends ("dispatches") in order,
// each with the frames it produced and its outcome (a result, or the error
// with the trigger the state machine fired). The run loop then drives a
// normal run whose Dialer is a [ReplayDialer]: every Connect, ListTools and
// CallTool is answered from the index, and a recorded failure comes back as
// the same failure, so the state machine takes the same decisions. Nothing
// here opens a socket or resolves a secret.
//
// Evidence is referenced, not copied: where a live run records frames, the
// replay records one replay.frames event per group of recorded frames (a
// session's initialize, its tools/list, one send of a call), naming the run
// that holds them, their seq spans, their count and the chain hash of the
// last one. Indexing reads each frame's members up to its body (responses
// whole, they rebuild results), so a replay costs a read of the source and a
// few writes, whatever the size of the evidence; inspect shows the
// referenced frames as the replay's own.
//
// A replay of a replay indexes the replay's references (reading the
// referenced responses); its own references name the run that holds the
// frames, while its source links (sourceRunId, sourceEffectId) name the
// replay, one hop at a time.

// KindDivergence is the error kind of a replay whose workflow asked for a
// call other than the recorded one.
const KindDivergence transport.Kind = "replay_divergence"

// ErrRunNotFinished refuses to replay a run that has no run.finished event.
var ErrRunNotFinished = errors.New("run is not finished")

// DivergenceError is the first difference between what a replay asks for
// and what the source run recorded. The CLI maps it to exit code 4.
type DivergenceError struct {
	SourceRunID string
	TaskID      string
	Attempt     int
	Field       string // "call", "server", "tool", "argumentsDigest", "dispatch", "session"
	Recorded    string
	Replayed    string
}

func (e *DivergenceError) Error() string {
	return fmt.Sprintf("replay diverged from %s at task %q (attempt %d): %s: recorded %s, replay asks %s",
		e.SourceRunID, e.TaskID, e.Attempt, e.Field, e.Recorded, e.Replayed)
}

// Unwrap makes a divergence a definitive failure for the state machine (a
// transport error that was never sent) and a failure decided by agentctl
// (exit 4), so the replay run ends failed, never uncertain.
func (e *DivergenceError) Unwrap() []error {
	return []error{&transport.Error{Op: "replay", Kind: KindDivergence, Message: e.Field},
		&callFailure{kind: KindDivergence, msg: e.Error()}}
}

// Replay is everything needed to re-run a recorded run.
type Replay struct {
	SourceRunID string
	Workflow    *spec.Workflow
	Inputs      map[string]any
	Dialer      *ReplayDialer
}

// PrepareReplay loads the workflow source and inputs stored in the source
// run's run.created and indexes its evidence. It refuses an unknown run
// (projector.ErrUnknownRun) and an unfinished one (ErrRunNotFinished).
func PrepareReplay(ctx context.Context, db *events.DB, sourceRunID string) (*Replay, error) {
	d, err := NewReplayDialer(ctx, db, sourceRunID)
	if err != nil {
		return nil, err
	}
	c := d.src.created
	wf, err := spec.Parse(c.File, []byte(c.Source))
	if err != nil {
		return nil, fmt.Errorf("replay %s: recorded workflow: %w", sourceRunID, err)
	}
	return &Replay{SourceRunID: sourceRunID, Workflow: wf, Inputs: d.src.inputs, Dialer: d}, nil
}

// ReplayDialer is a [Dialer] whose sessions answer from a recorded run. It
// ignores the transport configuration entirely: no socket, no DNS, no
// secret. Its sessions implement [Session] and [Recorded].
type ReplayDialer struct{ src *replaySource }

// NewReplayDialer indexes the evidence of sourceRunID.
func NewReplayDialer(ctx context.Context, db *events.DB, sourceRunID string) (*ReplayDialer, error) {
	src, err := loadReplaySource(ctx, db, sourceRunID)
	if err != nil {
		return nil, err
	}
	return &ReplayDialer{src: src}, nil
}

// Dial returns the recorded remote; cfg is not used.
func (d *ReplayDialer) Dial(remote string, _ transport.Config) (Conn, error) {
	return &replayConn{src: d.src, remote: remote}, nil
}

// Unused lists recorded calls (and sends) the replay never asked for, as
// "task/attempt/ordinal"; empty after a faithful replay.
func (d *ReplayDialer) Unused() []string {
	var out []string
	for k, c := range d.src.calls {
		if c.next < len(c.sends) {
			out = append(out, fmt.Sprintf("%s/%d/%d (%d of %d sends replayed)", k.task, k.attempt, k.ordinal, c.next, len(c.sends)))
		}
	}
	sort.Strings(out)
	return out
}

type callKey struct {
	task             string
	attempt, ordinal int
}

type recSession struct {
	opened  *projector.SessionOpened
	connect frameRefs // frames up to session.opened
	list    frameRefs // frames after it (tools/list)
	catalog *projector.SessionCatalog
	failure string
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
	responses []projector.Frame
	result    *projector.CallResult
	callErr   *projector.CallError
	trigger   string // the transition fired on callErr
}

type recCall struct {
	prepared projector.CallPrepared
	sends    []*recSend
	next     int
}

type replaySource struct {
	db       *events.DB // the source run's log, where frames are read back
	runID    string
	created  projector.RunCreated
	inputs   map[string]any
	exitCode int
	sessions map[string][]*recSession // remote → by generation-1
	calls    map[callKey]*recCall
	byEffect map[string]*recCall
	gens     map[string]int // Connects so far per remote
	current  *recCall       // the call the run loop prepared last
	curKey   callKey
}

func loadReplaySource(ctx context.Context, db *events.DB, runID string) (*replaySource, error) {
	src := &replaySource{db: db, runID: runID, sessions: map[string][]*recSession{}, calls: map[callKey]*recCall{},
		byEffect: map[string]*recCall{}, gens: map[string]int{}}
	finished, seen := false, false
	var pendingFail []*recSession // sessions that failed before session.opened or session.catalog
	// Scanned, not loaded: only the index (the frames to replay) stays in memory.
	var stop error // why fn stopped the scan, returned as is
	err := db.ScanPayloads(ctx, runID, func(e events.Event) error {
		if !seen && e.Type != projector.TypeRunCreated {
			stop = fmt.Errorf("%w %q", projector.ErrUnknownRun, runID)
			return stop
		}
		seen = true
		if err := src.index(ctx, e, &finished, &pendingFail); err != nil {
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
	if !finished {
		return nil, fmt.Errorf("replay %s: %w (no run.finished; resume or reconcile it first)", runID, ErrRunNotFinished)
	}
	return src, nil
}

func (src *replaySource) session(remote string, gen int) *recSession {
	for len(src.sessions[remote]) < gen {
		src.sessions[remote] = append(src.sessions[remote], &recSession{})
	}
	return src.sessions[remote][gen-1]
}

func (src *replaySource) index(ctx context.Context, e events.Event, finished *bool, pendingFail *[]*recSession) error {
	failWith := func(msg string) {
		for _, s := range *pendingFail {
			if s.failure == "" {
				s.failure = msg
			}
		}
		*pendingFail = nil
	}
	switch {
	case e.Type == projector.TypeRunCreated:
		dec := json.NewDecoder(strings.NewReader(e.Payload))
		dec.UseNumber() // inputs keep their numbers exactly as recorded
		if err := dec.Decode(&src.created); err != nil {
			return fmt.Errorf("decode run.created: %w", err)
		}
		src.inputs = src.created.Inputs
	case e.Type == projector.TypeRunFinished:
		var p projector.RunFinished
		if err := e.Decode(&p); err != nil {
			return err
		}
		*finished, src.exitCode = true, p.ExitCode
		failWith(p.Error)
	case e.Type == projector.TypeTaskFinished:
		var p projector.TaskFinished
		if err := e.Decode(&p); err != nil {
			return err
		}
		failWith(p.Error)
	case strings.HasPrefix(e.Type, projector.FramePrefix):
		// A frame is referenced where it is (no copy of its body is kept),
		// unless it is a response, which rebuilds the call's result.
		f, err := projector.DecodeFrameHeader(e)
		if err != nil {
			return err
		}
		if f.EffectID != "" {
			s, err := src.sendOf(f.EffectID)
			if err != nil {
				return err
			}
			if f.Dir == "in" && f.Kind == "response" {
				if f, err = projector.DecodeFrame(e); err != nil {
					return err
				}
				s.responses = append(s.responses, f)
			}
			return s.refs.add(src.runID, e.Seq)
		}
		return src.sessionFrames(f.Remote, f.Generation, pendingFail).add(src.runID, e.Seq)
	case e.Type == projector.TypeReplayFrames:
		// The source is itself a replay: its frames are in the run it names.
		var r projector.ReplayFrames
		if err := e.Decode(&r); err != nil {
			return err
		}
		if r.EffectID == "" {
			return src.sessionFrames(r.Remote, r.Generation, pendingFail).addSpans(r.SourceRunID, r.Spans, r.Count, r.LastHash)
		}
		s, err := src.sendOf(r.EffectID)
		if err != nil {
			return err
		}
		for _, sp := range r.Spans {
			err := src.db.ScanRange(ctx, r.SourceRunID, sp[0], sp[1], func(fe events.Event) error {
				h, err := projector.DecodeFrameHeader(fe)
				if err != nil || h.Dir != "in" || h.Kind != "response" {
					return err
				}
				f, err := projector.DecodeFrame(fe)
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
	case e.Type == projector.TypeSessionOpened:
		var p projector.SessionOpened
		if err := e.Decode(&p); err != nil {
			return err
		}
		s := src.session(p.Remote, p.Generation)
		s.opened = &p
		*pendingFail = appendOnce(*pendingFail, s) // until its catalog arrives
	case e.Type == projector.TypeSessionCatalog:
		var p projector.SessionCatalog
		if err := e.Decode(&p); err != nil {
			return err
		}
		s := src.session(p.Remote, p.Generation)
		s.catalog = &p
		kept := (*pendingFail)[:0]
		for _, x := range *pendingFail {
			if x != s {
				kept = append(kept, x)
			}
		}
		*pendingFail = kept
	case e.Type == projector.TypeCallPrepared:
		var p projector.CallPrepared
		if err := e.Decode(&p); err != nil {
			return err
		}
		c := &recCall{prepared: p}
		src.calls[callKey{p.TaskID, p.Attempt, p.Ordinal}] = c
		src.byEffect[p.EffectID] = c
	case e.Type == projector.TypeCallTransition:
		var p projector.CallTransition
		if err := e.Decode(&p); err != nil {
			return err
		}
		c := src.byEffect[p.EffectID]
		if c == nil {
			return fmt.Errorf("transition of unknown call %s", p.EffectID)
		}
		if n := len(c.sends); n > 0 && c.sends[n-1].callErr != nil && c.sends[n-1].trigger == "" {
			c.sends[n-1].trigger = p.Trigger
		}
		if p.Trigger == string(fsm.ReconnectFailed) {
			failWith(p.Reason)
		}
		if p.To == string(fsm.Dispatched) || p.To == string(fsm.Redispatched) {
			c.sends = append(c.sends, &recSend{})
		}
	case e.Type == projector.TypeCallResult:
		var p projector.CallResult
		if err := e.Decode(&p); err != nil {
			return err
		}
		if s := src.lastSend(p.EffectID); s != nil && s.result == nil && s.callErr == nil {
			s.result = &p
		}
	case e.Type == projector.TypeCallError:
		var p projector.CallError
		if err := e.Decode(&p); err != nil {
			return err
		}
		if s := src.lastSend(p.EffectID); s != nil && s.result == nil && s.callErr == nil {
			s.callErr = &p
		}
	}
	return nil
}

// sendOf is the send of call effectID that frames now belong to.
func (src *replaySource) sendOf(effectID string) (*recSend, error) {
	c := src.byEffect[effectID]
	if c == nil || len(c.sends) == 0 {
		return nil, fmt.Errorf("frame of call %s outside any send", effectID)
	}
	return c.sends[len(c.sends)-1], nil
}

// sessionFrames is where a session frame of (remote, gen) goes: before
// session.opened (initialize) or after it (tools/list).
func (src *replaySource) sessionFrames(remote string, gen int, pendingFail *[]*recSession) *frameRefs {
	s := src.session(remote, gen)
	if s.opened == nil {
		*pendingFail = appendOnce(*pendingFail, s)
		return &s.connect
	}
	return &s.list
}

func appendOnce(list []*recSession, s *recSession) []*recSession {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

func (src *replaySource) lastSend(effectID string) *recSend {
	c := src.byEffect[effectID]
	if c == nil || len(c.sends) == 0 {
		return nil
	}
	return c.sends[len(c.sends)-1]
}

// replayedError is a recorded failure: it prints exactly as recorded and
// unwraps to a transport error classified like the original.
type replayedError struct {
	msg string
	err error
}

func (e *replayedError) Error() string { return e.msg }
func (e *replayedError) Unwrap() error { return e.err }

// failure rebuilds a recorded call failure so that the run loop fires the
// same trigger it fired in the source run.
func (s *recSend) failure() error {
	ce := s.callErr
	te := &transport.Error{Op: "tools/call", Kind: transport.Kind(ce.Kind), Status: ce.Status, Code: ce.Code}
	switch fsm.Trigger(s.trigger) {
	case fsm.FailAmbiguous:
		te.Sent = true
	case fsm.FailPossiblyExecuted:
		te.Sent = true
		// Unauthorized is possibly executed only after the server accepted the call (a 401 on the resume GET).
		te.Accepted = te.Kind == transport.KindUnauthorized
		if !te.MayHaveExecuted() { // the source error was not a transport error
			return &replayedError{msg: ce.Message, err: errors.New(ce.Message)}
		}
	case fsm.Cancel:
		te.Kind, te.Sent = transport.KindCancelled, true
	}
	return &replayedError{msg: ce.Message, err: te}
}

// sessionFailure rebuilds a recorded failure to open a session or list its tools.
func (src *replaySource) sessionFailure(op, msg string) error {
	kind := transport.KindTransportLoss
	switch src.exitCode {
	case ExitUncertain:
		kind = transport.KindPolicyDenied
	case ExitCancelled:
		kind = transport.KindCancelled
	case ExitFailed:
		kind = transport.KindRemoteError
	}
	if msg == "" {
		msg = "recorded " + op + " failure"
	}
	return &replayedError{msg: msg, err: &transport.Error{Op: op, Kind: kind}}
}

type replayConn struct {
	src    *replaySource
	remote string
}

// replayedKind marks the transport.Frame by which a replay session hands
// the run loop a reference to recorded frames (frameSink records it as
// replay.frames): both ends are in this package.
const replayedKind = "replayed"

// emitRefs hands sink the reference to a group of recorded frames.
func (src *replaySource) emitRefs(ctx context.Context, sink transport.Sink, r frameRefs) error {
	if r.count == 0 {
		return nil
	}
	if r.lastHash == "" {
		h, err := src.db.HashAt(ctx, r.run, r.spans[len(r.spans)-1][1])
		if err != nil {
			return fmt.Errorf("replay %s: %w", src.runID, err)
		}
		r.lastHash = h
	}
	body, err := json.Marshal(projector.ReplayFrames{SourceRunID: r.run, Spans: r.spans, Count: r.count, LastHash: r.lastHash})
	if err != nil {
		return err
	}
	return sink(ctx, transport.Frame{Dir: "ref", Kind: replayedKind, Body: body})
}

// Connect opens the next recorded generation of this remote.
func (c *replayConn) Connect(ctx context.Context, sink transport.Sink) (Session, error) {
	src := c.src
	src.gens[c.remote]++
	gen := src.gens[c.remote]
	if gen > len(src.sessions[c.remote]) {
		return nil, &DivergenceError{SourceRunID: src.runID, TaskID: src.curKey.task, Attempt: src.curKey.attempt, Field: "session",
			Recorded: fmt.Sprintf("%d session(s) with %q", len(src.sessions[c.remote]), c.remote), Replayed: fmt.Sprintf("session %d", gen)}
	}
	rs := src.sessions[c.remote][gen-1]
	if err := src.emitRefs(ctx, sink, rs.connect); err != nil {
		return nil, err
	}
	if rs.opened == nil {
		return nil, src.sessionFailure("initialize", rs.failure)
	}
	return &replaySession{src: src, remote: c.remote, rec: rs}, nil
}

type replaySession struct {
	src    *replaySource
	remote string
	rec    *recSession
}

var _ Recorded = (*replaySession)(nil)

func (s *replaySession) Info() SessionInfo {
	return SessionInfo{ProtocolVersion: s.rec.opened.ProtocolVersion, ServerInfo: s.rec.opened.ServerInfo, IDDigest: s.rec.opened.SessionIDDigest}
}

func (s *replaySession) ListTools(ctx context.Context, sink transport.Sink) (*transport.Catalog, error) {
	if err := s.src.emitRefs(ctx, sink, s.rec.list); err != nil {
		return nil, err
	}
	if s.rec.catalog == nil {
		return nil, s.src.sessionFailure("tools/list", s.rec.failure)
	}
	cat := &transport.Catalog{Warnings: s.rec.catalog.Warnings}
	for _, t := range s.rec.catalog.Tools {
		cat.Tools = append(cat.Tools, transport.Tool{Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Execution: t.Execution})
	}
	return cat, nil
}

// CallTool checks the call against the recorded one (server, tool,
// arguments digest), replays the next recorded send's frames and returns
// its recorded outcome.
func (s *replaySession) CallTool(ctx context.Context, req transport.CallRequest, sink transport.Sink) (*transport.CallResult, error) {
	src := s.src
	div := func(field, recorded, replayed string) error {
		return &DivergenceError{SourceRunID: src.runID, TaskID: src.curKey.task, Attempt: src.curKey.attempt, Field: field, Recorded: recorded, Replayed: replayed}
	}
	c := src.current
	if c == nil {
		return nil, div("call", "no call at this position", fmt.Sprintf("%s/%s", s.remote, req.Tool))
	}
	p := c.prepared
	argDigest := canonjson.DigestBytes(req.Arguments)
	switch {
	case p.Server != s.remote:
		return nil, div("server", p.Server, s.remote)
	case p.Tool != req.Tool:
		return nil, div("tool", p.Tool, req.Tool)
	case p.ArgumentsDigest != argDigest:
		return nil, div("argumentsDigest", p.ArgumentsDigest, argDigest)
	case c.next >= len(c.sends):
		return nil, div("dispatch", fmt.Sprintf("%d send(s)", len(c.sends)), fmt.Sprintf("send %d", c.next+1))
	}
	send := c.sends[c.next]
	c.next++
	if err := src.emitRefs(ctx, sink, send.refs); err != nil {
		return nil, err
	}
	switch {
	case send.result != nil:
		return send.callResult()
	case send.callErr != nil:
		return nil, send.failure()
	}
	return nil, div("dispatch", "a send without a recorded outcome", "its outcome")
}

// callResult rebuilds the transport result from the recorded response frame.
func (s *recSend) callResult() (*transport.CallResult, error) {
	for i := len(s.responses) - 1; i >= 0; i-- {
		f := s.responses[i]
		if f.Dir != "in" || f.Kind != "response" {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(f.Body, &m); err != nil || len(m.Result) == 0 {
			continue
		}
		var r struct {
			IsError           bool            `json:"isError"`
			Content           json.RawMessage `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil {
			return nil, fmt.Errorf("replay: recorded result of %s: %w", s.result.EffectID, err)
		}
		if bytes.Equal(r.StructuredContent, []byte("null")) {
			r.StructuredContent = nil
		}
		id := s.result.JSONRPCID
		if len(id) == 0 {
			id = m.ID
		}
		return &transport.CallResult{Raw: m.Result, IsError: r.IsError, Content: r.Content, StructuredContent: r.StructuredContent, ID: id}, nil
	}
	return nil, fmt.Errorf("replay: call %s has a recorded result but no response frame", s.result.EffectID)
}

func (s *replaySession) Close(context.Context) error { return nil }

// SourceRunID is the run whose evidence answers.
func (s *replaySession) SourceRunID() string { return s.src.runID }

// SourceTaskID is the source task that opened this session.
func (s *replaySession) SourceTaskID() string { return s.rec.opened.TaskID }

// SourceEffectID names the recorded call answering (taskID, attempt,
// ordinal). The run loop asks right before it prepares the call, so this is
// also where the replay learns which recorded call the next CallTool must match.
func (s *replaySession) SourceEffectID(taskID string, attempt, ordinal int) string {
	src := s.src
	src.curKey = callKey{taskID, attempt, ordinal}
	src.current = src.calls[src.curKey]
	if src.current == nil {
		return ""
	}
	return src.current.prepared.EffectID
}
