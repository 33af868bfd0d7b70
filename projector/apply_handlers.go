package projector

import (
	"context"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// One handler per event type that changes a table (the handlers table in
// apply.go routes to them); each receives the decoded payload.

func applyRunCreated(ctx context.Context, tx *events.Tx, e events.Event, p vocab.RunCreated) error {
	state := "running"
	if p.Queued {
		state = "queued"
	}
	return exec(ctx, tx, `INSERT INTO runs (run_id, workflow, workflow_digest, mode, source_run_id, state, started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		e.RunID, p.Workflow, p.Digest, p.Mode, nullable(p.SourceRunID), state, e.CreatedAt, e.CreatedAt)
}

// applyRunStarted: a queued run starts now; its duration counts from here.
func applyRunStarted(ctx context.Context, tx *events.Tx, e events.Event, _ vocab.RunStarted) error {
	return exec(ctx, tx, `UPDATE runs SET state = 'running', started_at = ?, updated_at = ? WHERE run_id = ?`, e.CreatedAt, e.CreatedAt, e.RunID)
}

func applyRunFinished(ctx context.Context, tx *events.Tx, e events.Event, p vocab.RunFinished) error {
	return exec(ctx, tx, `UPDATE runs SET state = ?, exit_code = ?, error = ?, finished_at = ?, updated_at = ? WHERE run_id = ?`,
		p.State, p.ExitCode, nullable(clearText(e, p.Error)), e.CreatedAt, e.CreatedAt, e.RunID)
}

// applyRunResumed reopens the runs row: the run is running again until
// its next run.finished.
func applyRunResumed(ctx context.Context, tx *events.Tx, e events.Event, _ vocab.RunResumed) error {
	return exec(ctx, tx, `UPDATE runs SET state = 'running', exit_code = NULL, error = NULL, finished_at = NULL, updated_at = ? WHERE run_id = ?`,
		e.CreatedAt, e.RunID)
}

func applyTaskStarted(ctx context.Context, tx *events.Tx, e events.Event, p vocab.TaskStarted) error {
	// A row may be there already: the attempt was skipped, or scheduled
	// as a retry, before this (resumed) run started it.
	return exec(ctx, tx, `INSERT INTO tasks (run_id, task_id, attempt, server, tool, state, started_at, updated_at, rowid) VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?)
		ON CONFLICT (run_id, task_id, attempt) DO UPDATE SET server = excluded.server, tool = excluded.tool, state = 'running', error = NULL,
		started_at = excluded.started_at, finished_at = NULL, updated_at = excluded.updated_at`,
		e.RunID, p.TaskID, p.Attempt, nullable(p.Server), nullable(p.Tool), e.CreatedAt, e.CreatedAt, e.Seq)
}

// applyTaskSkipped adds the row of a task the run stopped before it started.
func applyTaskSkipped(ctx context.Context, tx *events.Tx, e events.Event, p vocab.TaskSkipped) error {
	return exec(ctx, tx, `INSERT INTO tasks (run_id, task_id, attempt, state, error, started_at, finished_at, updated_at, rowid) VALUES (?, ?, ?, 'skipped', ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, task_id, attempt) DO UPDATE SET state = 'skipped', error = excluded.error, finished_at = excluded.finished_at, updated_at = excluded.updated_at`,
		e.RunID, p.TaskID, p.Attempt, p.Reason, e.CreatedAt, e.CreatedAt, e.CreatedAt, e.Seq)
}

// applyTaskRetry adds the row of the next attempt, waiting for its notBefore.
func applyTaskRetry(ctx context.Context, tx *events.Tx, e events.Event, p vocab.TaskRetryScheduled) error {
	return exec(ctx, tx, `INSERT INTO tasks (run_id, task_id, attempt, state, error, started_at, updated_at, rowid) VALUES (?, ?, ?, 'retry_scheduled', ?, ?, ?, ?)
		ON CONFLICT (run_id, task_id, attempt) DO NOTHING`,
		e.RunID, p.TaskID, p.Attempt, "retry not before "+p.NotBefore, e.CreatedAt, e.CreatedAt, e.Seq)
}

func applyTaskFinished(ctx context.Context, tx *events.Tx, e events.Event, p vocab.TaskFinished) error {
	return exec(ctx, tx, `UPDATE tasks SET state = ?, error = ?, finished_at = ?, updated_at = ? WHERE run_id = ? AND task_id = ? AND attempt = ?`,
		p.State, nullable(clearText(e, p.Error)), e.CreatedAt, e.CreatedAt, e.RunID, p.TaskID, p.Attempt)
}

// sessionStatus is the status a session.opened gives its row.
func sessionStatus(p vocab.SessionOpened) string {
	switch {
	case p.SourceRunID != "":
		return "recorded"
	case p.Generation > 1:
		return "reinitialized"
	}
	return "initialized"
}

func applySessionOpened(ctx context.Context, tx *events.Tx, e events.Event, p vocab.SessionOpened) error {
	return exec(ctx, tx, `INSERT INTO protocol_sessions (run_id, task_id, remote, generation, url, status, session_id_digest, protocol_version, server_info, source_run_id, source_task_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.RunID, p.TaskID, p.Remote, p.Generation, p.URL, sessionStatus(p), nullable(p.SessionIDDigest), p.ProtocolVersion, nullable(clearJSON(e, p.ServerInfo)), nullable(p.SourceRunID), nullable(p.SourceTaskID), e.CreatedAt, e.CreatedAt)
}

func applySessionCatalog(ctx context.Context, tx *events.Tx, e events.Event, p vocab.SessionCatalog) error {
	return exec(ctx, tx, `UPDATE protocol_sessions SET catalog_digest = ?, updated_at = ? WHERE run_id = ? AND remote = ? AND generation = ?`,
		p.CatalogDigest, e.CreatedAt, e.RunID, p.Remote, p.Generation)
}

func applySessionExpired(ctx context.Context, tx *events.Tx, e events.Event, p vocab.SessionRef) error {
	return exec(ctx, tx, `UPDATE protocol_sessions SET status = CASE WHEN source_run_id IS NULL THEN 'expired' ELSE 'recorded' END, updated_at = ? WHERE run_id = ? AND remote = ? AND generation = ?`,
		e.CreatedAt, e.RunID, p.Remote, p.Generation)
}

// applyCallPrepared inserts the call's row; runs.calls is counted by Apply,
// once per batch.
func applyCallPrepared(ctx context.Context, tx *events.Tx, e events.Event, p vocab.CallPrepared) error {
	return exec(ctx, tx, `INSERT INTO protocol_calls (effect_id, run_id, task_id, attempt, operation, server, tool, idempotency, generation, status, arguments_digest, schema_digest, source_run_id, source_effect_id, protocol_state, created_at, updated_at) VALUES (?, ?, ?, ?, 'mcp.call', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		p.EffectID, e.RunID, p.TaskID, p.Attempt, p.Server, p.Tool, p.Idempotency, p.Generation, RowStatus(p.SourceRunID, "prepared"), p.ArgumentsDigest, nullable(p.SchemaDigest), nullable(p.SourceRunID), nullable(p.SourceEffectID), `{"state":"prepared","redispatches":0}`, e.CreatedAt, e.CreatedAt)
}

// applyCallTransition moves the call's row; a replayed call's row stays
// "recorded", its machine state is in protocol_state.
func applyCallTransition(ctx context.Context, tx *events.Tx, e events.Event, p vocab.CallTransition) error {
	state := fmt.Sprintf(`{"state":%q,"redispatches":%d}`, p.To, p.Redispatches)
	q := `UPDATE protocol_calls SET status = CASE WHEN source_run_id IS NULL THEN ? ELSE 'recorded' END, generation = ?, redispatches = ?, protocol_state = ?, updated_at = ?`
	args := []any{CallStatus(p.To), p.Generation, p.Redispatches, state, e.CreatedAt}
	if p.To == "failed" || p.To == "uncertain" || p.To == "cancelled" {
		q += `, error = COALESCE(error, ?)`
		args = append(args, nullable(clearText(e, p.Reason)))
	}
	q += ` WHERE effect_id = ?`
	return exec(ctx, tx, q, append(args, p.EffectID)...)
}

// applyCallResult records the result; a move it carries is folded into
// the same UPDATE unless it records an error.
func applyCallResult(ctx context.Context, tx *events.Tx, e events.Event, p vocab.CallResult) error {
	if t, ok := vocab.MoveOf(p); ok {
		if t.To == "failed" || t.To == "uncertain" || t.To == "cancelled" {
			p.Move = nil
			if err := applyCallResult(ctx, tx, e, p); err != nil {
				return err
			}
			return applyCallTransition(ctx, tx, e, t)
		}
		return exec(ctx, tx, `UPDATE protocol_calls SET result_digest = ?, json_rpc_id = ?, status = CASE WHEN source_run_id IS NULL THEN ? ELSE 'recorded' END, generation = ?, redispatches = ?, protocol_state = ?, updated_at = ? WHERE effect_id = ?`,
			p.ResultDigest, nullable(remoteJSON(p.JSONRPCID)), CallStatus(t.To), t.Generation, t.Redispatches, fmt.Sprintf(`{"state":%q,"redispatches":%d}`, t.To, t.Redispatches), e.CreatedAt, p.EffectID)
	}
	return exec(ctx, tx, `UPDATE protocol_calls SET result_digest = ?, json_rpc_id = ?, updated_at = ? WHERE effect_id = ?`,
		p.ResultDigest, nullable(remoteJSON(p.JSONRPCID)), e.CreatedAt, p.EffectID)
}

func applyCallError(ctx context.Context, tx *events.Tx, e events.Event, p vocab.CallError) error {
	return exec(ctx, tx, `UPDATE protocol_calls SET error = ?, updated_at = ? WHERE effect_id = ?`,
		p.Kind+": "+clearText(e, p.Message), e.CreatedAt, p.EffectID)
}

func applyCallReconciled(ctx context.Context, tx *events.Tx, e events.Event, p vocab.CallReconciled) error {
	return exec(ctx, tx, `INSERT INTO effects (effect_id, run_id, status, reason, result_digest, reconciled_at) VALUES (?, ?, ?, ?, ?, ?)`,
		p.EffectID, e.RunID, p.Status, p.Reason, nullable(p.ResultDigest), e.CreatedAt)
}
