package projector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// applyPair folds two adjacent events of one batch into one statement where
// the result is the same row as applying them one by one: call.prepared then
// its dispatch (a call.transition, or the request frame carrying the move;
// one INSERT with the row as the UPDATE would leave it), and call.result
// then its success transition (one UPDATE; a result carrying its move is
// folded by applyCallResult). A transition that records an error (failed,
// uncertain, cancelled) is never folded, so COALESCE(error, …) sees the
// row as before. It reports false, and writes nothing, when the pair does
// not qualify.
func applyPair(ctx context.Context, tx *events.Tx, first, second events.Event) (bool, error) {
	if (first.Type != vocab.TypeCallPrepared && first.Type != vocab.TypeCallResult) || first.Stream != second.Stream {
		return false, nil
	}
	var t vocab.CallTransition
	switch {
	case second.Type == vocab.TypeCallTransition:
		tr, err := vocab.Decode[vocab.CallTransition](second)
		if err != nil {
			return false, err
		}
		t = tr
	case first.Type == vocab.TypeCallPrepared && vocab.IsFrame(second.Type):
		tr, ok, err := vocab.EventMove(second)
		if err != nil || !ok {
			return false, err
		}
		t = tr
	default:
		return false, nil
	}
	if t.To == "failed" || t.To == "uncertain" || t.To == "cancelled" {
		return false, nil
	}
	state := fmt.Sprintf(`{"state":%q,"redispatches":%d}`, t.To, t.Redispatches)
	switch first.Type {
	case vocab.TypeCallPrepared:
		p, err := vocab.Decode[vocab.CallPrepared](first)
		if err != nil {
			return false, err
		}
		if p.EffectID != t.EffectID {
			return false, nil
		}
		if err := attachCall(ctx, tx, first, p); err != nil {
			return false, err
		}
		_, err = tx.Exec(ctx, `INSERT INTO protocol_calls (effect_id, run_id, task_id, attempt, operation, server, tool, idempotency, generation, redispatches, status, arguments_digest, schema_digest, source_run_id, source_effect_id, protocol_state, created_at, updated_at) VALUES (?, ?, ?, ?, 'mcp.call', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.EffectID, first.RunID, p.TaskID, p.Attempt, p.Server, p.Tool, p.Idempotency, t.Generation, t.Redispatches, RowStatus(p.SourceRunID, CallStatus(t.To)),
			p.ArgumentsDigest, nullable(p.SchemaDigest), nullable(p.SourceRunID), nullable(p.SourceEffectID), state, first.CreatedAt, second.CreatedAt)
		return true, err
	default:
		r, err := vocab.Decode[vocab.CallResult](first)
		if err != nil {
			return false, err
		}
		if r.EffectID != t.EffectID || r.Move != nil {
			return false, nil
		}
		_, err = tx.Exec(ctx, `UPDATE protocol_calls SET result_digest = ?, json_rpc_id = ?, status = CASE WHEN source_run_id IS NULL THEN ? ELSE 'recorded' END, generation = ?, redispatches = ?, protocol_state = ?, updated_at = ? WHERE effect_id = ?`,
			r.ResultDigest, nullable(remoteJSON(r.JSONRPCID)), CallStatus(t.To), t.Generation, t.Redispatches, state, second.CreatedAt, r.EffectID)
		return true, err
	}
}

// attachCall attaches the session a call.prepared names to its task when
// another task opened it (what session.attached recorded before).
func attachCall(ctx context.Context, tx *events.Tx, e events.Event, p vocab.CallPrepared) error {
	if p.SessionFrom == "" {
		return nil
	}
	return attachSession(ctx, tx, e, vocab.SessionRef{Remote: p.Server, Generation: p.Generation, TaskID: p.TaskID, FromTaskID: p.SessionFrom})
}

// attachSession copies the session row a task found open (FromTaskID's)
// to the attaching task, unless it has one. On a pipelined PostgreSQL
// append it is one INSERT … SELECT (a read would cost a round trip of its
// own); on SQLite, read then insert: an INSERT … SELECT from the same
// table makes SQLite materialise the SELECT first.
func attachSession(ctx context.Context, tx *events.Tx, e events.Event, p vocab.SessionRef) error {
	if tx.Pipelined() {
		return exec(ctx, tx, `INSERT INTO protocol_sessions (run_id, task_id, remote, generation, url, status, session_id_digest, protocol_version, server_info, catalog_digest, source_run_id, source_task_id, created_at, updated_at)
SELECT run_id, ?, remote, generation, url, status, session_id_digest, protocol_version, server_info, catalog_digest, source_run_id, source_task_id, ?, ? FROM protocol_sessions
WHERE run_id = ? AND task_id = ? AND remote = ? AND generation = ? ON CONFLICT DO NOTHING`,
			p.TaskID, e.CreatedAt, e.CreatedAt, e.RunID, p.FromTaskID, p.Remote, p.Generation)
	}
	row, err := tx.QueryRow(ctx, `SELECT url, status, session_id_digest, protocol_version, server_info, catalog_digest, source_run_id, source_task_id FROM protocol_sessions WHERE run_id = ? AND task_id = ? AND remote = ? AND generation = ?`,
		e.RunID, p.FromTaskID, p.Remote, p.Generation)
	if err != nil {
		return err
	}
	var url, status string
	var sid, pv, info, cat, srcRun, srcTask sql.NullString
	if err := row.Scan(&url, &status, &sid, &pv, &info, &cat, &srcRun, &srcTask); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil // as INSERT … SELECT of no row
		}
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO protocol_sessions (run_id, task_id, remote, generation, url, status, session_id_digest, protocol_version, server_info, catalog_digest, source_run_id, source_task_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		e.RunID, p.TaskID, p.Remote, p.Generation, url, status, sid, pv, info, cat, srcRun, srcTask, e.CreatedAt, e.CreatedAt)
	return err
}
