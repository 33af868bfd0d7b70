package projector_test

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
)

// callLog is a run of two tasks on one session (the second attaches to
// the session the first opened): a call that succeeds, and one that fails.
// With facts set it is written as this release writes it (moves on the
// facts, sessionFrom on call.prepared); without, as a log written before
// (call.transition and session.attached events).
func callLog(run string, facts bool) []events.Record {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	mv := func(to, trigger, reason string) *vocab.Move {
		if !facts {
			return nil
		}
		return &vocab.Move{To: to, Trigger: trigger, Reason: reason, Generation: 1}
	}
	tr := func(id, from, to, trigger, reason string) []events.Record {
		if facts {
			return nil
		}
		return []events.Record{{Stream: "call/" + id, Type: vocab.TypeCallTransition,
			Payload: vocab.CallTransition{EffectID: id, From: from, To: to, Trigger: trigger, Reason: reason, Generation: 1}}}
	}
	e1, e2 := run+"-e1", run+"-e2"
	prep := func(id, task string) vocab.CallPrepared {
		p := vocab.CallPrepared{EffectID: id, TaskID: task, Attempt: 1, Ordinal: 1, Server: "local", Tool: "act", Idempotency: "idempotent",
			Generation: 1, ArgumentsDigest: "sha256:a", SchemaDigest: "sha256:s", Arguments: raw(`{}`)}
		if facts {
			p.State = "prepared"
			if task == "t2" {
				p.SessionFrom = "t1"
			}
		}
		return p
	}
	frame := func(id, task, dir, kind, method string, m *vocab.Move) events.Record {
		return events.Record{Stream: "call/" + id, Type: vocab.FramePrefix + kind, Payload: vocab.Frame{Dir: dir, Kind: kind, Method: method,
			Remote: "local", Generation: 1, TaskID: task, Attempt: 1, EffectID: id, Move: m, Body: raw(`{"jsonrpc":"2.0"}`)}}
	}
	var recs []events.Record
	add := func(rs ...events.Record) { recs = append(recs, rs...) }
	add(events.Record{Stream: "run", Type: vocab.TypeRunCreated, Payload: vocab.RunCreated{RunID: run, Workflow: "w", Digest: "d", Mode: "run"}},
		events.Record{Stream: "task/t1/1", Type: vocab.TypeTaskStarted, Payload: vocab.TaskStarted{TaskID: "t1", Attempt: 1, Server: "local", Tool: "act"}},
		events.Record{Stream: "session/local/1", Type: vocab.TypeSessionOpened, Payload: vocab.SessionOpened{Remote: "local", URL: "http://127.0.0.1/mcp", Generation: 1, TaskID: "t1", ProtocolVersion: "2025-11-25"}},
		events.Record{Stream: "session/local/1", Type: vocab.TypeSessionCatalog, Payload: vocab.SessionCatalog{Remote: "local", Generation: 1, TaskID: "t1", CatalogDigest: "sha256:c"}},
		events.Record{Stream: "call/" + e1, Type: vocab.TypeCallPrepared, Payload: prep(e1, "t1")})
	add(tr(e1, "prepared", "dispatched", "dispatch", "")...)
	add(frame(e1, "t1", "out", "request", "tools/call", mv("dispatched", "dispatch", "")), frame(e1, "t1", "in", "response", "", nil),
		events.Record{Stream: "call/" + e1, Type: vocab.TypeCallResult, Payload: vocab.CallResult{EffectID: e1, JSONRPCID: raw(`1`), ResultDigest: "sha256:r",
			Output: raw(`{"ok":true}`), Move: mv("succeeded", "succeed", "")}})
	add(tr(e1, "dispatched", "succeeded", "succeed", "")...)
	add(events.Record{Stream: "task/t1/1", Type: vocab.TypeTaskFinished, Payload: vocab.TaskFinished{TaskID: "t1", Attempt: 1, State: "succeeded"}},
		events.Record{Stream: "task/t2/1", Type: vocab.TypeTaskStarted, Payload: vocab.TaskStarted{TaskID: "t2", Attempt: 1, Server: "local", Tool: "act"}})
	if !facts {
		add(events.Record{Stream: "session/local/1", Type: vocab.TypeSessionAttached, Payload: vocab.SessionRef{Remote: "local", Generation: 1, TaskID: "t2", FromTaskID: "t1"}})
	}
	add(events.Record{Stream: "call/" + e2, Type: vocab.TypeCallPrepared, Payload: prep(e2, "t2")})
	add(tr(e2, "prepared", "dispatched", "dispatch", "")...)
	add(frame(e2, "t2", "out", "request", "tools/call", mv("dispatched", "dispatch", "")), frame(e2, "t2", "in", "response", "", nil),
		events.Record{Stream: "call/" + e2, Type: vocab.TypeCallError, Payload: vocab.CallError{EffectID: e2, Kind: "tool_error", Message: "boom",
			Move: mv("failed", "fail_definitive", "boom")}})
	add(tr(e2, "dispatched", "failed", "fail_definitive", "boom")...)
	add(events.Record{Stream: "task/t2/1", Type: vocab.TypeTaskFinished, Payload: vocab.TaskFinished{TaskID: "t2", Attempt: 1, State: "failed", Error: "boom"}},
		events.Record{Stream: "run", Type: vocab.TypeRunFinished, Payload: vocab.RunFinished{State: "failed", ExitCode: 4}})
	return recs
}

// TestApply_FactsProjectAsTransitions: a run whose moves ride on facts
// projects the same rows (protocol_calls, protocol_sessions with the
// attached task's copy, tasks, runs) as the same run written with
// call.transition and session.attached events, incrementally and when
// rebuilt, on both backends; its transitions read back the same.
func TestApply_FactsProjectAsTransitions(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		db := b.Open(t, events.Options{})
		ctx := context.Background()
		// Times, run ids and the run's event count (fewer events) aside.
		norm := regexp.MustCompile(`"[0-9]{4}-[0-9]{2}-[0-9]{2}T[^"]*"|run-(old|new)|"(events|last_seq)":[0-9]+`)
		shots := map[bool]string{}
		moves := map[bool]string{}
		for _, facts := range []bool{false, true} {
			run := map[bool]string{false: "run-old", true: "run-new"}[facts]
			recs := callLog(run, facts)
			if _, err := db.Append(ctx, run, recs[:5], projector.Apply); err != nil { // one commit, then the rest
				t.Fatal(err)
			}
			evs, err := db.Append(ctx, run, recs[5:], projector.Apply)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(evs) + 5; facts && n != 16 || !facts && n != 21 {
				t.Fatalf("facts=%v: %d events", facts, n)
			}
			shots[facts] = norm.ReplaceAllString(snapshot(t, db, run), "X")
			all, err := db.Events(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			ts, err := projector.Transitions(all)
			if err != nil {
				t.Fatal(err)
			}
			for i := range ts {
				ts[i].EffectID = ""
			}
			b, _ := json.Marshal(ts)
			moves[facts] = string(b)
		}
		if shots[true] != shots[false] {
			t.Fatalf("projection from facts:\n%s\nfrom transitions:\n%s", shots[true], shots[false])
		}
		if moves[true] != moves[false] || len(moves[true]) < 10 {
			t.Fatalf("transitions from facts %s\nfrom call.transition %s", moves[true], moves[false])
		}
		for facts, want := range shots {
			run := map[bool]string{false: "run-old", true: "run-new"}[facts]
			if err := projector.Rebuild(ctx, db, run); err != nil {
				t.Fatal(err)
			}
			if got := norm.ReplaceAllString(snapshot(t, db, run), "X"); got != want {
				t.Fatalf("facts=%v: rebuilt\n%s\nincremental\n%s", facts, got, want)
			}
		}
	})
}
