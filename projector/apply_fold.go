package projector

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// A commit usually holds several steps of a row's life: a task started
// and finished, a call prepared, dispatched, answered and moved to its
// end. Writing each step as a statement of its own cost a call several
// statements on its two rows; fold holds the rows a batch inserts in
// memory, applies the batch's later steps to them there, and writes each
// once, as the row the statements one by one would have left. Any event
// fold does not handle first writes the rows held so far (flush), so every
// other handler sees the tables exactly as before.

// taskRow is a tasks row inserted by this batch (task.started).
type taskRow struct {
	runID, taskID         string
	attempt               int
	server, tool          any
	state                 string
	errText               any
	startedAt, finishedAt any
	updatedAt             string
	seq                   int64 // of the event that inserted it: the row's rowid (listing order)
}

type taskKey struct {
	taskID  string
	attempt int
}

// callRow is a protocol_calls row inserted by this batch (call.prepared).
type callRow struct {
	p                         vocab.CallPrepared
	runID                     string
	generation, redispatches  int
	status, protocolState     string
	resultDigest, jsonRPCID   any
	errText                   any
	createdAt, updatedAt      string
	sourceRunID, sourceEffect any
	schemaDigest              any
}

// sessionRow is a protocol_sessions row inserted by this batch
// (session.opened), with the catalog digest a session.catalog of the same
// batch sets.
type sessionRow struct {
	runID, remote       string
	generation          int
	taskID, url, status string
	sessionIDDigest     any
	protocolVersion     string
	serverInfo          any
	sourceRunID         any
	sourceTaskID        any
	catalogDigest       any
	createdAt           string
	updatedAt           string
}

// fold holds the rows a batch inserted and has not written yet.
type fold struct {
	tasks    []*taskRow
	taskByID map[taskKey]*taskRow
	calls    []*callRow
	callByID map[string]*callRow
	sessions []*sessionRow
}

// pendingSession is the unwritten row of (remote, generation), or nil.
func (f *fold) pendingSession(remote string, generation int) *sessionRow {
	for _, r := range f.sessions {
		if r.remote == remote && r.generation == generation {
			return r
		}
	}
	return nil
}

// pendingCall is the unwritten row of effectID, or nil.
func (f *fold) pendingCall(effectID string) *callRow {
	if f.callByID == nil {
		return nil
	}
	return f.callByID[effectID]
}

// apply projects e, folding it into a held row when it can; it reports
// false when e is not one fold handles (the caller flushes, then applies
// it on its own).
func (f *fold) apply(ctx context.Context, tx *events.Tx, e events.Event) (bool, error) {
	switch e.Type {
	case vocab.TypeTaskStarted:
		p, err := vocab.Decode[vocab.TaskStarted](e)
		if err != nil {
			return true, err
		}
		f.taskStarted(e, p)
		return true, nil
	case vocab.TypeTaskFinished:
		p, err := vocab.Decode[vocab.TaskFinished](e)
		if err != nil {
			return true, err
		}
		r := f.taskByID[taskKey{p.TaskID, p.Attempt}]
		if r == nil {
			return true, applyTaskFinished(ctx, tx, e, p)
		}
		r.state, r.errText, r.finishedAt, r.updatedAt = p.State, nullable(clearText(e, p.Error)), e.CreatedAt, e.CreatedAt
		return true, nil
	case vocab.TypeSessionOpened:
		p, err := vocab.Decode[vocab.SessionOpened](e)
		if err != nil {
			return true, err
		}
		if f.pendingSession(p.Remote, p.Generation) != nil {
			return false, nil // opened twice in one batch: as the statements would, one by one
		}
		f.sessions = append(f.sessions, &sessionRow{runID: e.RunID, remote: p.Remote, generation: p.Generation, taskID: p.TaskID, url: p.URL,
			status: sessionStatus(p), sessionIDDigest: nullable(p.SessionIDDigest), protocolVersion: p.ProtocolVersion,
			serverInfo: nullable(clearJSON(e, p.ServerInfo)), sourceRunID: nullable(p.SourceRunID), sourceTaskID: nullable(p.SourceTaskID),
			createdAt: e.CreatedAt, updatedAt: e.CreatedAt})
		return true, nil
	case vocab.TypeSessionCatalog:
		p, err := vocab.Decode[vocab.SessionCatalog](e)
		if err != nil {
			return true, err
		}
		if r := f.pendingSession(p.Remote, p.Generation); r != nil {
			r.catalogDigest, r.updatedAt = p.CatalogDigest, e.CreatedAt
			return true, nil
		}
		return true, applySessionCatalog(ctx, tx, e, p)
	case vocab.TypeCallPrepared:
		p, err := vocab.Decode[vocab.CallPrepared](e)
		if err != nil {
			return true, err
		}
		f.callPrepared(e, p)
		return true, nil
	case vocab.TypeCallTransition:
		t, err := vocab.Decode[vocab.CallTransition](e)
		if err != nil {
			return true, err
		}
		if r := f.pendingCall(t.EffectID); r != nil {
			r.move(e, t)
			return true, nil
		}
		return true, applyCallTransition(ctx, tx, e, t)
	case vocab.TypeCallResult:
		p, err := vocab.Decode[vocab.CallResult](e)
		if err != nil {
			return true, err
		}
		if r := f.pendingCall(p.EffectID); r != nil {
			r.result(e, p)
			return true, nil
		}
		return true, applyCallResult(ctx, tx, e, p)
	case vocab.TypeCallError:
		p, err := vocab.Decode[vocab.CallError](e)
		if err != nil {
			return true, err
		}
		r := f.pendingCall(p.EffectID)
		if r == nil {
			return false, nil
		}
		r.errText, r.updatedAt = p.Kind+": "+clearText(e, p.Message), e.CreatedAt
		if t, ok := vocab.MoveOf(p); ok {
			r.move(e, t)
		}
		return true, nil
	}
	if !vocab.IsFrame(e.Type) {
		return false, nil
	}
	t, ok, err := vocab.EventMove(e)
	if err != nil || !ok {
		return true, err
	}
	if r := f.pendingCall(t.EffectID); r != nil {
		r.move(e, t)
		return true, nil
	}
	return true, applyCallTransition(ctx, tx, e, t)
}

// taskStarted holds the row task.started writes. The statement is an
// upsert that sets every column, so the row does not depend on one that
// was there (a skipped or retry-scheduled attempt).
func (f *fold) taskStarted(e events.Event, p vocab.TaskStarted) {
	k := taskKey{p.TaskID, p.Attempt}
	r := &taskRow{runID: e.RunID, taskID: p.TaskID, attempt: p.Attempt, server: nullable(p.Server), tool: nullable(p.Tool),
		state: "running", startedAt: e.CreatedAt, updatedAt: e.CreatedAt, seq: e.Seq}
	if f.taskByID == nil {
		f.taskByID = map[taskKey]*taskRow{}
	}
	if old := f.taskByID[k]; old != nil {
		r.seq = old.seq
		*old = *r // started again in one batch: the upsert overwrites it, not its rowid
		return
	}
	f.taskByID[k] = r
	f.tasks = append(f.tasks, r)
}

// callPrepared holds the row call.prepared inserts.
func (f *fold) callPrepared(e events.Event, p vocab.CallPrepared) {
	r := &callRow{p: p, runID: e.RunID, generation: p.Generation, status: RowStatus(p.SourceRunID, "prepared"),
		protocolState: `{"state":"prepared","redispatches":0}`, createdAt: e.CreatedAt, updatedAt: e.CreatedAt,
		sourceRunID: nullable(p.SourceRunID), sourceEffect: nullable(p.SourceEffectID), schemaDigest: nullable(p.SchemaDigest)}
	if f.callByID == nil {
		f.callByID = map[string]*callRow{}
	}
	f.callByID[p.EffectID] = r
	f.calls = append(f.calls, r)
}

// move is applyCallTransition on a held row.
func (r *callRow) move(e events.Event, t vocab.CallTransition) {
	r.status = RowStatus(r.p.SourceRunID, CallStatus(t.To))
	r.generation, r.redispatches, r.updatedAt = t.Generation, t.Redispatches, e.CreatedAt
	r.protocolState = fmt.Sprintf(`{"state":%q,"redispatches":%d}`, t.To, t.Redispatches)
	if (t.To == "failed" || t.To == "uncertain" || t.To == "cancelled") && r.errText == nil {
		r.errText = nullable(clearText(e, t.Reason))
	}
}

// result is applyCallResult on a held row.
func (r *callRow) result(e events.Event, p vocab.CallResult) {
	r.resultDigest, r.jsonRPCID, r.updatedAt = p.ResultDigest, nullable(remoteJSON(p.JSONRPCID)), e.CreatedAt
	if t, ok := vocab.MoveOf(p); ok {
		r.move(e, t)
	}
}

// flush writes the held rows, one statement each, and forgets them.
func (f *fold) flush(ctx context.Context, tx *events.Tx) error {
	for _, r := range f.tasks {
		if err := exec(ctx, tx, `INSERT INTO tasks (run_id, task_id, attempt, server, tool, state, error, started_at, finished_at, updated_at, rowid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, task_id, attempt) DO UPDATE SET server = excluded.server, tool = excluded.tool, state = excluded.state, error = excluded.error,
		started_at = excluded.started_at, finished_at = excluded.finished_at, updated_at = excluded.updated_at`,
			r.runID, r.taskID, r.attempt, r.server, r.tool, r.state, r.errText, r.startedAt, r.finishedAt, r.updatedAt, r.seq); err != nil {
			return fmt.Errorf("project task %s attempt %d: %w", r.taskID, r.attempt, err)
		}
	}
	for _, r := range f.calls {
		p := r.p
		if err := exec(ctx, tx, `INSERT INTO protocol_calls (effect_id, run_id, task_id, attempt, operation, server, tool, idempotency, generation, redispatches, status, arguments_digest, schema_digest, result_digest, error, protocol_state, source_run_id, source_effect_id, json_rpc_id, created_at, updated_at) VALUES (?, ?, ?, ?, 'mcp.call', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.EffectID, r.runID, p.TaskID, p.Attempt, p.Server, p.Tool, p.Idempotency, r.generation, r.redispatches, r.status,
			p.ArgumentsDigest, r.schemaDigest, r.resultDigest, r.errText, r.protocolState, r.sourceRunID, r.sourceEffect, r.jsonRPCID, r.createdAt, r.updatedAt); err != nil {
			return fmt.Errorf("project call %s: %w", p.EffectID, err)
		}
	}
	for _, r := range f.sessions {
		if err := exec(ctx, tx, `INSERT INTO protocol_sessions (run_id, task_id, remote, generation, url, status, session_id_digest, protocol_version, server_info, source_run_id, source_task_id, catalog_digest, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.runID, r.taskID, r.remote, r.generation, r.url, r.status, r.sessionIDDigest, r.protocolVersion, r.serverInfo, r.sourceRunID, r.sourceTaskID,
			r.catalogDigest, r.createdAt, r.updatedAt); err != nil {
			return fmt.Errorf("project session %s generation %d: %w", r.remote, r.generation, err)
		}
	}
	f.tasks, f.taskByID, f.calls, f.callByID, f.sessions = f.tasks[:0], nil, f.calls[:0], nil, f.sessions[:0]
	return nil
}
