package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
)

// scriptDialer is a workflow.Dialer whose sessions answer tools/call from
// a script of outcomes (nil = success), shared across sessions, so a
// test sees exactly how many requests the run loop sent.
type scriptDialer struct {
	mu       sync.Mutex
	script   []error
	calls    int
	sessions int
}

var (
	_ workflow.Dialer  = (*scriptDialer)(nil)
	_ workflow.Conn    = (*scriptDialer)(nil)
	_ workflow.Session = (*scriptSession)(nil)
)

func (d *scriptDialer) Dial(string, transport.Config) (workflow.Conn, error) { return d, nil }

func (d *scriptDialer) Connect(context.Context, transport.Sink) (workflow.Session, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.sessions++
	return &scriptSession{d: d}, nil
}

type scriptSession struct{ d *scriptDialer }

func (s *scriptSession) Info() workflow.SessionInfo {
	return workflow.SessionInfo{ProtocolVersion: "2025-11-25"}
}

func (s *scriptSession) ListTools(context.Context, transport.Sink) (*transport.Catalog, error) {
	return &transport.Catalog{Tools: []transport.Tool{{Name: "act", InputSchema: json.RawMessage(`{"type":"object"}`)}}}, nil
}

func (s *scriptSession) CallTool(context.Context, transport.CallRequest, transport.Sink) (*transport.CallResult, error) {
	s.d.mu.Lock()
	defer s.d.mu.Unlock()
	s.d.calls++
	var err error
	if len(s.d.script) > 0 {
		err, s.d.script = s.d.script[0], s.d.script[1:]
	}
	if err != nil {
		return nil, err
	}
	return &transport.CallResult{Raw: json.RawMessage(`{"structuredContent":{"ok":true}}`), StructuredContent: json.RawMessage(`{"ok":true}`), ID: json.RawMessage(`3`)}, nil
}

func (s *scriptSession) Close(context.Context) error { return nil }

// taxonomy is every failure the transport reports for a tools/call that was
// sent, with the class of failure docs/ARCHITECTURE.md gives it.
func taxonomy() []struct {
	err   *transport.Error
	class string // "ambiguous", "possibly", "definitive"
} {
	type row = struct {
		err   *transport.Error
		class string
	}
	e := func(k transport.Kind, status int) *transport.Error {
		return &transport.Error{Op: "tools/call", Kind: k, Status: status, Sent: true, Message: "scripted"}
	}
	return []row{
		{e(transport.KindSessionExpired, 404), "ambiguous"},
		{e(transport.KindTimeout, 0), "ambiguous"},
		{e(transport.KindTransportLoss, 0), "ambiguous"},
		{e(transport.KindMalformed, 0), "ambiguous"},
		{e(transport.KindCancelled, 0), "possibly"},
		{e(transport.KindHTTPStatus, http.StatusServiceUnavailable), "possibly"},
		{e(transport.KindHTTPStatus, http.StatusBadRequest), "definitive"},
		{e(transport.KindUnauthorized, 401), "definitive"},
		{e(transport.KindRemoteError, 0), "definitive"},
		{e(transport.KindVersionMismatch, 0), "definitive"},
		{e(transport.KindPolicyDenied, 0), "definitive"},
		{e(transport.KindToolError, 0), "definitive"},
		{e(transport.KindInvalidArguments, 0), "definitive"},
		{e(transport.KindInvalidOutput, 0), "definitive"},
		{e(transport.KindUnsupported, 0), "definitive"},
		// Not sent: nothing can have executed, whatever the kind.
		{&transport.Error{Op: "tools/call", Kind: transport.KindTransportLoss, Message: "dial refused"}, "definitive"},
	}
}

// fastDB opens a log without fsync per commit, for tests that make many runs.
func fastDB(t *testing.T) *events.DB {
	t.Helper()
	db, err := events.Open(context.Background(), filepath.Join(t.TempDir(), "agentctl.db"), events.Options{Durability: events.DurabilityNormal})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// runScript runs the one-task workflow on db (a fresh one when nil)
// against a scriptDialer answering from script.
func runScript(t *testing.T, db *events.DB, idem string, script ...error) (*scriptDialer, *workflow.Result, projector.CallView, *events.DB) {
	t.Helper()
	d := &scriptDialer{script: script}
	if db == nil {
		db = fastDB(t)
	}
	wf := mustParse(t, oneCall("http://127.0.0.1:1/mcp", "act", idem, `{}`))
	res, err := (&workflow.Runner{DB: db, Dialer: d}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d, res, callView(t, db, res.RunID), db
}

// TestRedispatch_Table: 5 classes × every kind of the transport taxonomy,
// first send failing, a second send (if any) succeeding.
func TestRedispatch_Table(t *testing.T) {
	for _, row := range taxonomy() {
		for _, idem := range classes {
			name := fmt.Sprintf("%s-%d-sent=%v/%s", row.err.Kind, row.err.Status, row.err.Sent, idem)
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				d, res, c, _ := runScript(t, nil, idem, row.err)
				wantCalls, wantStatus, wantExit := 1, "failed", workflow.ExitFailed
				switch {
				case row.class == "ambiguous" && redispatchable(idem):
					wantCalls, wantStatus, wantExit = 2, "succeeded", 0
				case row.class == "ambiguous", row.class == "possibly":
					wantStatus, wantExit = "uncertain", workflow.ExitUncertain
				}
				if d.calls != wantCalls || c.Status != wantStatus || c.Redispatches != wantCalls-1 || (wantExit == 0) != (res.Err == nil) {
					t.Fatalf("sent %d, call %s (redispatches %d), err %v; want %d, %s", d.calls, c.Status, c.Redispatches, res.Err, wantCalls, wantStatus)
				}
				if wantExit == workflow.ExitUncertain && exitCode(res) != wantExit {
					t.Fatalf("exit %d, want %d", exitCode(res), wantExit)
				}
			})
		}
	}
}

// TestRedispatch_RandomFailures: random failure sequences never yield more
// than one redispatch, nor any for at_most_once and unknown, and the
// projection always agrees with the machine rebuilt from the log.
func TestRedispatch_RandomFailures(t *testing.T) {
	const seed = 4
	rng := rand.New(rand.NewPCG(seed, seed))
	tax := taxonomy()
	db := fastDB(t)
	runs := 200
	if testing.Short() {
		runs = 30
	}
	for i := 0; i < runs; i++ {
		idem := classes[rng.IntN(len(classes))]
		script := make([]error, 1+rng.IntN(4))
		for j := range script {
			if rng.IntN(4) > 0 {
				script[j] = tax[rng.IntN(len(tax))].err
			}
		}
		d, _, c, _ := runScript(t, db, idem, script...)
		max := 1
		if redispatchable(idem) {
			max = 2
		}
		if d.calls > max || c.Redispatches > max-1 || d.sessions > max {
			t.Fatalf("seed %d run %d %s %v: %d sends, %d redispatches, %d sessions", seed, i, idem, script, d.calls, c.Redispatches, d.sessions)
		}
		var trs []fsm.Transition
		evs, err := db.Events(context.Background(), c.RunID)
		if err != nil {
			t.Fatal(err)
		}
		moves, err := projector.Transitions(evs)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range moves {
			trs = append(trs, fsm.Transition{From: fsm.State(p.From), To: fsm.State(p.To), Trigger: fsm.Trigger(p.Trigger), Reason: p.Reason})
		}
		m, err := fsm.Rebuild(fsm.Idempotency(idem), trs)
		if err != nil || projector.CallStatus(string(m.State)) != c.Status || m.Redispatches != c.Redispatches {
			t.Fatalf("seed %d run %d: rebuilt %+v (%v), projection %s/%d", seed, i, m, err, c.Status, c.Redispatches)
		}
	}
}
