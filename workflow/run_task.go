package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/internal/canonjson"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// remoteState is the live session with one remote during a run.
type remoteState struct {
	name     string
	sess     Session
	gen      int
	catalog  *transport.Catalog
	owner    string // task that opened the session
	attempt  int    // the owner's attempt that opened it
	attached map[string]bool
	// recorded is settled once session.catalog is durable: it rides with
	// the opening lane's next commit, and a lane that uses the session
	// commits nothing before it.
	recorded *carry
	// pool: the session is shared with other runs of this process
	// (Runner.Sessions); the run releases it at its end, never closes it.
	pool *pooledSession
}

// task runs one attempt of a task and returns its output, or the failure
// that ends it. prev is the attempt as recorded when resume continues an
// attempt that was interrupted (its task.started is already in the log);
// nil starts a new attempt. A definitive failure that the action's retry
// policy allows to retry comes back with the schedule of the next attempt,
// recorded in the same commit as the failure.
func (rn *run) task(ctx context.Context, t spec.TaskSpec, attempt int, prev *loggedAttempt) (any, *Error, *vocab.TaskRetryScheduled) {
	action := rn.wf.Action(t)
	idem, err := fsm.ParseIdempotency(action.Class())
	if err != nil {
		return nil, &Error{RunID: rn.id, Code: ExitInvalid, Err: fmt.Errorf("task %s: %w", t.ID, err)}, nil
	}
	if prev == nil {
		started := vocab.TaskStarted{TaskID: t.ID, Attempt: attempt, Server: t.With.Server, Tool: t.With.Tool, Action: t.ActionName(), Idempotency: string(idem)}
		// Committed with the attempt's first protocol step.
		rn.later(events.Record{Stream: taskStream(t.ID, attempt), Type: vocab.TypeTaskStarted, Payload: started})
	}
	out, ofCall, code, kind, err := rn.taskBody(ctx, t, attempt, idem, prev)
	var next *vocab.TaskRetryScheduled
	if err != nil && retries(kind, idem) {
		next = rn.retryPlan(ctx, t, attempt, err)
	}
	out, fail := rn.finishTask(t, attempt, out, ofCall, code, err, next)
	if fail != nil && fail.Code == ExitStorage {
		next = nil
	}
	return out, fail, next
}

// finishAttempt records task.finished (with the next attempt's schedule,
// if any) and turns a failure into the *Error that ends the task.
func (rn *run) finishAttempt(t spec.TaskSpec, attempt int, out any, code int, err error, next *vocab.TaskRetryScheduled) (any, *Error) {
	return rn.finishTask(t, attempt, out, false, code, err, next)
}

// finishTask is finishAttempt; ofCall says a success's output is its call's
// call.result output, which task.finished then leaves out (OutputOfCall).
func (rn *run) finishTask(t spec.TaskSpec, attempt int, out any, ofCall bool, code int, err error, next *vocab.TaskRetryScheduled) (any, *Error) {
	fin := vocab.TaskFinished{TaskID: t.ID, Attempt: attempt, State: StateSucceeded}
	if err != nil {
		fin.State, fin.Error, fin.ErrorKind = stateFor(code, err), err.Error(), string(transport.KindOf(err))
	} else if fin.Output, _ = json.Marshal(out); ofCall && len(fin.Output) >= minLeftOut {
		fin.Output, fin.OutputOfCall = nil, true
	}
	rec := events.Record{Stream: taskStream(t.ID, attempt), Type: vocab.TypeTaskFinished, Payload: fin}
	if err == nil {
		// A success rides with the next protocol step: the next task's
		// request (or run.finished) commits it before any byte is sent, so
		// the gap between two calls is one commit, not two.
		rn.later(rec)
		return out, nil
	}
	recs := []events.Record{rec}
	if next != nil {
		recs = append(recs, events.Record{Stream: taskStream(t.ID, next.Attempt), Type: vocab.TypeTaskRetry, Payload: *next})
	}
	if aerr := rn.append(recs...); aerr != nil {
		return nil, rn.storageFail(aerr)
	}
	return nil, &Error{RunID: rn.id, Code: code, Err: fmt.Errorf("task %s: %w", t.ID, err)}
}

func (rn *run) storageFail(err error) *Error {
	return &Error{RunID: rn.id, Code: ExitStorage, Err: err}
}

func taskStream(id string, attempt int) string { return fmt.Sprintf("task/%s/%d", id, attempt) }

// taskBody makes the attempt's call (a fresh one, or the recorded one of
// an interrupted attempt) and checks the task's output contract. kind says
// what a failure proves about the call, for the retry decision: an output
// that breaks the task's contract came from a tool that ran. ofCall says
// a success's output is the call's call.result output.
func (rn *run) taskBody(ctx context.Context, t spec.TaskSpec, attempt int, idem fsm.Idempotency, prev *loggedAttempt) (out any, ofCall bool, code int, kind failureKind, err error) {
	var c *call
	if prev != nil && prev.call != nil {
		if c, err = rn.resumedCall(t, prev.call); err != nil {
			return nil, false, ExitStorage, failFinal, err
		}
		out, err = c.resume(ctx, prev.call)
	} else {
		if c, err = rn.newCall(ctx, t, attempt, idem); err != nil {
			return nil, false, exitFor(err), failureBeforeCall(ctx, err), err
		}
		out, err = c.run(ctx)
	}
	if rn.replay {
		rn.replayCall = c
	}
	if err != nil {
		code, kind := c.exitCode(err), c.failure(ctx, err)
		if c.m.State == fsm.Uncertain {
			err = c.uncertain(err)
		}
		return nil, false, code, kind, err
	}
	out, code, err = rn.checkContract(t, out)
	return out, c.ofResult, code, failMayHaveRun, err
}

// checkContract applies the task's outputSchema to its output.
func (rn *run) checkContract(t spec.TaskSpec, out any) (any, int, error) {
	if len(t.OutputSchema) > 0 {
		if err := rn.contracts.validateContract(t.OutputSchema, out); err != nil {
			return nil, ExitFailed, fmt.Errorf("output contract: %w", err)
		}
	}
	return out, ExitOK, nil
}

// newCall renders the task's arguments and opens (or reuses) the session;
// a tool not in the session's catalog fails the task (nothing is sent).
func (rn *run) newCall(ctx context.Context, t spec.TaskSpec, attempt int, idem fsm.Idempotency) (*call, error) {
	rendered, err := rn.wf.RenderArguments(t.ID, rn.view)
	if err != nil {
		return nil, err // a *spec.TemplateError: file:line:col of the template
	}
	if rendered == nil {
		rendered = map[string]any{}
	}
	args, err := canonjson.Marshal(rendered)
	if err != nil {
		return nil, fmt.Errorf("with.arguments: %w", err)
	}
	rs, err := rn.session(ctx, t.With.Server, t.ID, attempt)
	if err != nil {
		return nil, err
	}
	tool, ok := rs.catalog.Find(t.With.Tool)
	if !ok {
		return nil, &callFailure{kind: fsm.ReasonToolMissing,
			msg: fmt.Sprintf("tool %q not found on server %q; available: %s", t.With.Tool, t.With.Server, toolNames(rs.catalog))}
	}
	return &call{rn: rn, task: t, attempt: attempt, rs: rs, tool: tool, args: args, m: fsm.New(idem)}, nil
}

func toolNames(c *transport.Catalog) string {
	names := make([]string, 0, len(c.Tools))
	for _, t := range c.Tools {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return "(none)"
	}
	return strings.Join(names, ", ")
}

// session returns the run's live session with remote, opening one if
// needed. Concurrent tasks share it: the first opens it, the others wait
// and attach. The lane first waits for the commits it must follow (the
// tasks it needs, carried by another lane's first commit): a lane that
// opens a session commits under sessMu, and must not wait there for a
// lane that is itself waiting for sessMu.
func (rn *run) session(ctx context.Context, remote, taskID string, attempt int) (*remoteState, error) {
	if err := rn.awaitCarries(); err != nil {
		return nil, err
	}
	rn.sessMu.Lock()
	defer rn.sessMu.Unlock()
	if rs := rn.current(remote); rs != nil {
		rn.attach(rs, taskID)
		return rs, nil
	}
	return rn.open(ctx, remote, taskID, attempt, true)
}

// current is the live session with remote, or nil.
func (rn *run) current(remote string) *remoteState {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	return rn.remotes[remote]
}

// attach records that taskID uses rs, once per task (sessMu held). The
// lane's next commit waits until rs's catalog is durable, so nothing is
// sent on rs before its session.catalog is on disk.
func (rn *run) attach(rs *remoteState, taskID string) {
	if c := rs.recorded; c != nil && !containsCarry(rn.carrying, c) {
		rn.waitFor = append(rn.waitFor, c)
	}
	if rs.owner != taskID && !rs.attached[taskID] {
		rs.attached[taskID] = true
		ref := vocab.SessionRef{Remote: rs.name, Generation: rs.gen, TaskID: taskID, FromTaskID: rs.owner}
		rn.later(events.Record{Stream: sessionStream(rs.name, rs.gen), Type: vocab.TypeSessionAttached, Payload: ref})
	}
}

// retire takes rs out of use after it failed (expired, or a call on it
// ended ambiguously): the next call opens or finds a newer generation.
// Calls still in flight on it keep it until they end; it is closed when
// the run ends.
func (rn *run) retire(rs *remoteState) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.remotes[rs.name] == rs {
		delete(rn.remotes, rs.name)
	}
	if rs.pool != nil {
		rs.pool.retire() // no other run borrows it either
	}
}

func sessionStream(remote string, gen int) string { return fmt.Sprintf("session/%s/%d", remote, gen) }

// openSession initializes a new session (the next generation) and lists
// its tools, session.catalog committed before it returns. The caller
// holds sessMu.
func (rn *run) openSession(ctx context.Context, remote, taskID string, attempt int) (*remoteState, error) {
	return rn.open(ctx, remote, taskID, attempt, false)
}

// open is openSession. The handshake (initialize, its response,
// notifications/initialized, session.opened, tools/list and its
// responses) has no effect on the server's tools, so none of it need be
// durable before the next frame is sent: every frame is recorded as it
// comes, in wire order, and rides with one commit. Without deferCatalog
// that commit is session.catalog's, before open returns; with it (a task
// about to call a tool on the session) the whole handshake rides with the
// lane's next commit: the call's intent, committed before tools/call is
// sent, or the failure the task records. Other lanes using the session
// commit nothing before that one (attach). A crash before it leaves no
// trace of the session, and nothing was sent that had an effect.
func (rn *run) open(ctx context.Context, remote, taskID string, attempt int, deferCatalog bool) (*remoteState, error) {
	return rn.openWith(ctx, remote, taskID, attempt, deferCatalog, false)
}

// openWith is open; with taskPoll the session is the resumed call's own,
// opened only to ask about its task (session.opened says so), and never
// becomes the run's session with the remote.
func (rn *run) openWith(ctx context.Context, remote, taskID string, attempt int, deferCatalog, taskPoll bool) (*remoteState, error) {
	if rs, pooled, err := rn.fromPool(ctx, remote, taskID, attempt, deferCatalog, taskPoll); pooled {
		return rs, err // borrowed from the worker's pool, or opened for it
	}
	conn, err := rn.conn(remote)
	if err != nil {
		return nil, err
	}
	rn.mu.Lock()
	rn.gens[remote]++
	gen := rn.gens[remote]
	rn.mu.Unlock()
	base := vocab.Frame{Remote: remote, Generation: gen, TaskID: taskID, Attempt: attempt}
	sink := rn.laterSink(sessionStream(remote, gen), base)
	sess, err := conn.Connect(ctx, sink)
	if err != nil {
		return nil, err
	}
	rs := &remoteState{name: remote, sess: sess, gen: gen, owner: taskID, attempt: attempt, attached: map[string]bool{}}
	rn.mu.Lock()
	rn.opened = append(rn.opened, rs)
	rn.mu.Unlock()
	info := sess.Info()
	opened := vocab.SessionOpened{Remote: remote, URL: rn.wf.Spec.MCPServers[remote].Endpoint(), Generation: gen, TaskID: taskID,
		ProtocolVersion: info.ProtocolVersion, ServerInfo: info.ServerInfo, SessionIDDigest: info.IDDigest, TaskPoll: taskPoll}
	if rec, ok := sess.(Recorded); ok {
		opened.SourceRunID, opened.SourceTaskID = rec.SourceRunID(), rec.SourceTaskID()
	}
	rn.later(events.Record{Stream: sessionStream(remote, gen), Type: vocab.TypeSessionOpened, Payload: opened})
	cat, err := sess.ListTools(ctx, sink)
	if err != nil {
		return nil, err
	}
	rec := vocab.SessionCatalog{Remote: remote, Generation: gen, TaskID: taskID, CatalogDigest: cat.Digest(), Tools: rn.recordedTools(remote, toolInfos(cat)), Warnings: cat.Warnings}
	if err := rn.recordCatalog(rs, events.Record{Stream: sessionStream(remote, gen), Type: vocab.TypeSessionCatalog, Payload: rec}, deferCatalog); err != nil {
		return nil, err
	}
	rs.catalog = cat
	if !taskPoll {
		rn.mu.Lock()
		rn.remotes[remote] = rs
		rn.mu.Unlock()
	}
	return rs, nil
}

// conn returns the run's connection to remote, dialing it on first use.
func (rn *run) conn(remote string) (Conn, error) {
	rn.mu.Lock()
	conn := rn.conns[remote]
	rn.mu.Unlock()
	if conn != nil {
		return conn, nil
	}
	d := rn.r.Dialer
	if d == nil {
		d = NetworkDialer{}
	}
	cfg := rn.wf.TransportConfig(remote)
	if v := rn.protos[remote]; cfg.ProtocolVersion == transport.ProtocolAuto && v != "" {
		cfg.ProtocolVersion = v // probed once, recorded: a run never changes version
	}
	cfg.UserAgent = rn.r.UserAgent
	cfg.Getenv = rn.r.Getenv
	if rn.r.TraceContext != nil && !rn.replay {
		cfg.TraceContext = rn.r.TraceContext(rn.id)
	}
	if err := rn.authorize(remote, &cfg); err != nil {
		return nil, err
	}
	conn, err := d.Dial(remote, cfg)
	if err != nil {
		return nil, err
	}
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if prev := rn.conns[remote]; prev != nil {
		return prev, nil
	}
	rn.conns[remote] = conn
	return conn, nil
}

// sink persists every frame (with any pending records) before the
// transport sends or reads the next one.
func (rn *run) sink(stream string, base vocab.Frame) transport.Sink {
	return rn.frameSink(stream, base, false)
}

// frameSink is sink; with deferResponse the final response frame is held
// and committed with the call's outcome (call.result, the transition,
// task.finished) in one transaction. Nothing is read after a response, so
// every frame is still on disk before the next one is read; a crash before
// that commit leaves the call dispatched with no outcome: ambiguous, as if
// the response had never arrived.
func (rn *run) frameSink(stream string, base vocab.Frame, deferResponse bool) transport.Sink {
	return func(_ context.Context, f transport.Frame) error {
		if f.Kind == replayedKind {
			return rn.recordReplayed(stream, base, f.Body)
		}
		fr := base
		fr.Dir, fr.Kind, fr.Method, fr.ID, fr.HTTPStatus, fr.EventID = f.Dir, f.Kind, f.Method, f.ID, f.HTTPStatus, f.EventID
		fr.Body = frameBody(f.Body)
		rec := events.Record{Stream: stream, Type: vocab.FramePrefix + f.Kind, Payload: vocab.StoredFrame(stream, fr)}
		if deferResponse && f.Dir == "in" && f.Kind == "response" {
			rn.later(rec)
			return nil
		}
		return rn.append(rec)
	}
}

// laterSink records every frame with the lane's next commit (a replay
// session's references to recorded frames as well).
func (rn *run) laterSink(stream string, base vocab.Frame) transport.Sink {
	return func(_ context.Context, f transport.Frame) error {
		if f.Kind == replayedKind {
			return rn.recordReplayed(stream, base, f.Body)
		}
		fr := base
		fr.Dir, fr.Kind, fr.Method, fr.ID, fr.HTTPStatus, fr.EventID = f.Dir, f.Kind, f.Method, f.ID, f.HTTPStatus, f.EventID
		fr.Body = frameBody(f.Body)
		rn.later(events.Record{Stream: stream, Type: vocab.FramePrefix + f.Kind, Payload: vocab.StoredFrame(stream, fr)})
		return nil
	}
}

// frameBody is a frame's body as recorded: JSON as is, anything else as
// a JSON string.
func frameBody(b []byte) json.RawMessage {
	if len(b) == 0 || !json.Valid(b) {
		s, _ := json.Marshal(string(b))
		return s
	}
	return b
}

// recordReplayed records a replay session's reference to recorded frames
// (replay.frames) where the frames themselves would have gone. It rides
// with the next step (session.opened, session.catalog, the call's outcome):
// the frames are already durable in the log, and nothing is sent.
func (rn *run) recordReplayed(stream string, base vocab.Frame, body []byte) error {
	var r vocab.ReplayFrames
	if err := json.Unmarshal(body, &r); err != nil {
		return fmt.Errorf("replay: reference to recorded frames: %w", err)
	}
	r.Remote, r.Generation, r.TaskID, r.Attempt, r.EffectID = base.Remote, base.Generation, base.TaskID, base.Attempt, base.EffectID
	rn.later(events.Record{Stream: stream, Type: vocab.TypeReplayFrames, Payload: r})
	return nil
}

var errNoOutput = errors.New("result has neither structuredContent nor content")

// recordCatalog records rs's session.catalog: at once, or, with
// deferCatalog, with the lane's next commit, other lanes on rs waiting for
// that commit (attach) before they send anything on it.
func (rn *run) recordCatalog(rs *remoteState, catRec events.Record, deferCatalog bool) error {
	if !deferCatalog {
		return rn.append(catRec)
	}
	rn.later(catRec)
	rs.recorded = &carry{done: make(chan struct{})}
	rn.carrying = append(rn.carrying, rs.recorded)
	return nil
}
