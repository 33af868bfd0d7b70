package replay_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay/replaytest"
)

// payloadsOf decodes every event of type typ in runID, in log order.
func payloadsOf[T any](t *testing.T, db *events.DB, runID, typ string) []T {
	t.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []T
	for _, e := range evs {
		if e.Type != typ {
			continue
		}
		var p T
		if err := e.Decode(&p); err != nil {
			t.Fatalf("decode %s seq %d: %v", typ, e.Seq, err)
		}
		out = append(out, p)
	}
	return out
}

// TestReplay_SessionFailureKind: a replay rebuilds a failed initialize with
// the error kind the source recorded (task.finished errorKind), not one
// guessed from the run's exit code: a 403 on initialize is http_status
// (exit 5), which the exit code alone would have read as transport_loss.
func TestReplay_SessionFailureKind(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	srv.Inject(mcptest.Fault{RPCMethod: "initialize", Status: http.StatusForbidden})
	db := openDB(t)
	src := runAct(t, db, srv, "idempotent", nil)
	srcFin := payloadsOf[vocab.TaskFinished](t, db, src.RunID, vocab.TypeTaskFinished)
	if len(srcFin) != 1 || srcFin[0].ErrorKind != "http_status" || srcFin[0].Error == "" {
		t.Fatalf("source task.finished = %+v; want one, errorKind http_status", srcFin)
	}
	rep := replaytest.Replay(t, db, src.RunID)
	if exitCode(rep) != exitCode(src) || rep.State != src.State {
		t.Fatalf("replay ended %s exit %d; source %s exit %d", rep.State, exitCode(rep), src.State, exitCode(src))
	}
	repFin := payloadsOf[vocab.TaskFinished](t, db, rep.RunID, vocab.TypeTaskFinished)
	if len(repFin) != 1 || repFin[0].Error != srcFin[0].Error || repFin[0].ErrorKind != srcFin[0].ErrorKind || repFin[0].State != srcFin[0].State {
		t.Fatalf("replay task.finished = %+v; source %+v", repFin, srcFin)
	}
}

// TestReplay_ReconnectFailureKind: a reconnect that fails (403 on the second
// initialize, after a 404 expired the session) is replayed with the kind,
// status and message of its recorded call.error; the exit code (3,
// uncertain) would have guessed policy_denied.
func TestReplay_ReconnectFailureKind(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
	srv.Inject(mcptest.Fault{RPCMethod: "initialize", Status: http.StatusForbidden, Nth: 2})
	db := openDB(t)
	src := runAct(t, db, srv, "idempotent", nil)
	if exitCode(src) != workflow.ExitUncertain {
		t.Fatalf("source ended %s exit %d (%v); want uncertain", src.State, exitCode(src), src.Err)
	}
	srcErrs := payloadsOf[vocab.CallError](t, db, src.RunID, vocab.TypeCallError)
	if len(srcErrs) != 2 || srcErrs[1].Kind != "http_status" || srcErrs[1].Status != http.StatusForbidden {
		t.Fatalf("source call.error = %+v; want the 404, then the reconnect's 403 (http_status)", srcErrs)
	}
	rep := replaytest.Replay(t, db, src.RunID)
	if exitCode(rep) != exitCode(src) || rep.State != src.State {
		t.Fatalf("replay ended %s exit %d; source %s exit %d", rep.State, exitCode(rep), src.State, exitCode(src))
	}
	repErrs := payloadsOf[vocab.CallError](t, db, rep.RunID, vocab.TypeCallError)
	if len(repErrs) != len(srcErrs) {
		t.Fatalf("replay call.error = %+v; source %+v", repErrs, srcErrs)
	}
	for i := range srcErrs {
		s, r := srcErrs[i], repErrs[i]
		s.EffectID, r.EffectID = "", "" // the replay's calls have their own ids
		s.Move, r.Move = nil, nil       // compared with the transitions below
		if s != r {
			t.Fatalf("call.error %d: replay %+v; source %+v", i, r, s)
		}
	}
	srcTr, repTr := runMoves(t, db, src.RunID), runMoves(t, db, rep.RunID)
	if len(repTr) != len(srcTr) {
		t.Fatalf("replay transitions = %+v; source %+v", repTr, srcTr)
	}
	for i := range srcTr {
		s, r := srcTr[i], repTr[i]
		s.EffectID, r.EffectID = "", ""
		if s != r {
			t.Fatalf("transition %d: replay %+v; source %+v", i, r, s)
		}
	}
}
