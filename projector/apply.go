package projector

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/events"
)

// Apply folds evs (one committed batch of one run) into the projection
// tables inside tx. It is an events.Applier.
func Apply(ctx context.Context, tx *events.Tx, evs []events.Event) error {
	if len(evs) == 0 {
		return nil
	}
	calls := 0 // call.prepared events: the run's call counter, updated once per batch
	// The run row follows the last non-frame event: a batch of frames alone
	// (a progress notification) is one INSERT and nothing else, and the
	// value does not depend on how events were batched, so rebuilt rows
	// equal incremental ones. Inspect counts events from the log itself.
	var step *events.Event
	for i := range evs {
		if evs[i].Type == TypeCallPrepared {
			calls++
		}
		if !strings.HasPrefix(evs[i].Type, FramePrefix) {
			step = &evs[i]
		}
	}
	for i := 0; i < len(evs); i++ {
		e := evs[i]
		if i+1 < len(evs) {
			folded, err := applyPair(ctx, tx, e, evs[i+1])
			if err != nil {
				return fmt.Errorf("project %s seq %d: %w", e.Type, e.Seq, err)
			}
			if folded {
				i++
				continue
			}
		}
		if err := applyOne(ctx, tx, e); err != nil {
			return fmt.Errorf("project %s seq %d: %w", e.Type, e.Seq, err)
		}
	}
	if step == nil {
		return nil
	}
	_, err := tx.Exec(ctx, `UPDATE runs SET calls = calls + ?, events = ?, last_seq = ?, updated_at = ? WHERE run_id = ?`, calls, step.Seq, step.Seq, step.CreatedAt, step.RunID)
	if err != nil {
		return fmt.Errorf("project run counters: %w", err)
	}
	return nil
}

// RowStatus is the status of a new protocol row: "recorded" when the row
// was copied from a source run by replay, else status.
func RowStatus(sourceRunID, status string) string {
	if sourceRunID != "" {
		return "recorded"
	}
	return status
}

// CallStatus maps a state-machine state to the protocol_calls status.
func CallStatus(fsmState string) string {
	switch fsmState {
	case "reconnecting", "redispatched":
		return "dispatched"
	}
	return fsmState
}

func applyOne(ctx context.Context, tx *events.Tx, e events.Event) error {
	exec := func(q string, args ...any) error {
		_, err := tx.Exec(ctx, q, args...)
		return err
	}
	switch e.Type {
	case TypeRunCreated:
		var p RunCreated
		if err := e.Decode(&p); err != nil {
			return err
		}
		state := "running"
		if p.Queued {
			state = "queued"
		}
		return exec(`INSERT INTO runs (run_id, workflow, workflow_digest, mode, source_run_id, state, started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
			e.RunID, p.Workflow, p.Digest, p.Mode, nullable(p.SourceRunID), state, e.CreatedAt, e.CreatedAt)
	case TypeRunStarted:
		// A queued run starts now: its duration counts from here.
		return exec(`UPDATE runs SET state = 'running', started_at = ?, updated_at = ? WHERE run_id = ?`, e.CreatedAt, e.CreatedAt, e.RunID)
	case TypeRunFinished:
		var p RunFinished
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`UPDATE runs SET state = ?, exit_code = ?, error = ?, finished_at = ? WHERE run_id = ?`,
			p.State, p.ExitCode, nullable(p.Error), e.CreatedAt, e.RunID)
	case TypeTaskStarted:
		var p TaskStarted
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`INSERT INTO tasks (run_id, task_id, attempt, server, tool, state, started_at, updated_at) VALUES (?, ?, ?, ?, ?, 'running', ?, ?)`,
			e.RunID, p.TaskID, p.Attempt, nullable(p.Server), nullable(p.Tool), e.CreatedAt, e.CreatedAt)
	case TypeTaskFinished:
		var p TaskFinished
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`UPDATE tasks SET state = ?, error = ?, finished_at = ?, updated_at = ? WHERE run_id = ? AND task_id = ? AND attempt = ?`,
			p.State, nullable(p.Error), e.CreatedAt, e.CreatedAt, e.RunID, p.TaskID, p.Attempt)
	case TypeSessionOpened:
		var p SessionOpened
		if err := e.Decode(&p); err != nil {
			return err
		}
		status := "initialized"
		if p.Generation > 1 {
			status = "reinitialized"
		}
		if p.SourceRunID != "" {
			status = "recorded"
		}
		return exec(`INSERT INTO protocol_sessions (run_id, task_id, remote, generation, url, status, session_id_digest, protocol_version, server_info, source_run_id, source_task_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			e.RunID, p.TaskID, p.Remote, p.Generation, p.URL, status, nullable(p.SessionIDDigest), p.ProtocolVersion, nullable(string(p.ServerInfo)), nullable(p.SourceRunID), nullable(p.SourceTaskID), e.CreatedAt, e.CreatedAt)
	case TypeSessionCatalog:
		var p SessionCatalog
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`UPDATE protocol_sessions SET catalog_digest = ?, updated_at = ? WHERE run_id = ? AND remote = ? AND generation = ?`,
			p.CatalogDigest, e.CreatedAt, e.RunID, p.Remote, p.Generation)
	case TypeSessionExpired:
		var p SessionRef
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`UPDATE protocol_sessions SET status = CASE WHEN source_run_id IS NULL THEN 'expired' ELSE 'recorded' END, updated_at = ? WHERE run_id = ? AND remote = ? AND generation = ?`,
			e.CreatedAt, e.RunID, p.Remote, p.Generation)
	case TypeSessionAttached:
		var p SessionRef
		if err := e.Decode(&p); err != nil {
			return err
		}
		return attachSession(ctx, tx, e, p)
	case TypeCallPrepared:
		var p CallPrepared
		if err := e.Decode(&p); err != nil {
			return err
		}
		// runs.calls is counted by Apply, once per batch.
		return exec(`INSERT INTO protocol_calls (effect_id, run_id, task_id, attempt, operation, server, tool, idempotency, generation, status, arguments_digest, schema_digest, source_run_id, source_effect_id, protocol_state, created_at, updated_at) VALUES (?, ?, ?, ?, 'mcp.call', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			p.EffectID, e.RunID, p.TaskID, p.Attempt, p.Server, p.Tool, p.Idempotency, p.Generation, RowStatus(p.SourceRunID, "prepared"), p.ArgumentsDigest, nullable(p.SchemaDigest), nullable(p.SourceRunID), nullable(p.SourceEffectID), `{"state":"prepared","redispatches":0}`, e.CreatedAt, e.CreatedAt)
	case TypeCallTransition:
		var p CallTransition
		if err := e.Decode(&p); err != nil {
			return err
		}
		state := fmt.Sprintf(`{"state":%q,"redispatches":%d}`, p.To, p.Redispatches)
		// A replayed call's row stays "recorded"; its machine state is in protocol_state.
		q := `UPDATE protocol_calls SET status = CASE WHEN source_run_id IS NULL THEN ? ELSE 'recorded' END, generation = ?, redispatches = ?, protocol_state = ?, updated_at = ?`
		args := []any{CallStatus(p.To), p.Generation, p.Redispatches, state, e.CreatedAt}
		if p.To == "failed" || p.To == "uncertain" || p.To == "cancelled" {
			q += `, error = COALESCE(error, ?)`
			args = append(args, nullable(p.Reason))
		}
		q += ` WHERE effect_id = ?`
		return exec(q, append(args, p.EffectID)...)
	case TypeCallResult:
		var p CallResult
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`UPDATE protocol_calls SET result_digest = ?, json_rpc_id = ?, updated_at = ? WHERE effect_id = ?`,
			p.ResultDigest, nullable(string(p.JSONRPCID)), e.CreatedAt, p.EffectID)
	case TypeCallError:
		var p CallError
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`UPDATE protocol_calls SET error = ?, updated_at = ? WHERE effect_id = ?`,
			p.Kind+": "+p.Message, e.CreatedAt, p.EffectID)
	case TypeCallReconciled:
		var p CallReconciled
		if err := e.Decode(&p); err != nil {
			return err
		}
		return exec(`INSERT INTO effects (effect_id, run_id, status, reason, result_digest, reconciled_at) VALUES (?, ?, ?, ?, ?, ?)`,
			p.EffectID, e.RunID, p.Status, p.Reason, nullable(p.ResultDigest), e.CreatedAt)
	case TypeRunResumed:
		return applyRunResumed(ctx, tx, e)
	}
	if strings.HasPrefix(e.Type, FramePrefix) {
		return nil // frames are evidence; inspect reads them from the log
	}
	return nil
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
