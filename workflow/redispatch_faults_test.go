package workflow_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// swapAfterFirstCatalog replaces the tool on srv once the first session's
// catalog is committed, so only the reconnect's session sees the new one.
func swapAfterFirstCatalog(srv *mcptest.Server, tool mcptest.ToolDef) func(events.Event) {
	done := false
	return func(e events.Event) {
		if e.Type == vocab.TypeSessionCatalog && !done {
			done = true
			srv.AddTool(tool)
		}
	}
}

// TestRedispatch_SchemaDigest: after the restart, a changed schema fails the
// call (schema_changed) with no second request; the same schema with its
// keys reordered on the wire is unchanged (canonical digest) and resent.
func TestRedispatch_SchemaDigest(t *testing.T) {
	changed := actTool(nil)
	changed.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"string"}}}`)
	reordered := actTool(nil)
	reordered.InputSchema = json.RawMessage(`{"properties":{"n":{"type":"integer"}},"type":"object"}`)
	reordered.OutputSchema = json.RawMessage(`{"required":["done"],"properties":{"done":{"type":"boolean"}},"type":"object"}`)
	reordered.Description = "descriptions never decide anything"
	for _, tc := range []struct {
		name  string
		tool  mcptest.ToolDef
		calls int
		state string
		last  string
	}{
		{"changed", changed, 1, "failed", "call.error reconnecting->failed"},
		{"reordered", reordered, 2, "succeeded", "call.result redispatched->succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, actTool(nil))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
			db := openDB(t)
			res := runAct(t, db, srv, "idempotent", swapAfterFirstCatalog(srv, tc.tool))
			if st := srv.Stats(); st.Calls["act"] != tc.calls || st.Initialize != 2 {
				t.Fatalf("server saw %d calls, %d initializations; want %d, 2", st.Calls["act"], st.Initialize, tc.calls)
			}
			c := callView(t, db, res.RunID)
			if c.Status != tc.state {
				t.Fatalf("call = %+v (err %v)", c, res.Err)
			}
			if got := describeRun(t, db, res.RunID); !slices.Contains(got, tc.last) {
				t.Fatalf("events lack %q:\n%s", tc.last, strings.Join(got, "\n"))
			}
			if tc.state == "failed" {
				if exitCode(res) != workflow.ExitFailed || c.Error == nil || !strings.HasPrefix(*c.Error, "schema_changed") {
					t.Fatalf("exit %d, error %v", exitCode(res), res.Err)
				}
			}
		})
	}
}

// TestRedispatch_OneReconnectBound: the call fails ambiguously again after
// the reconnect; that is final (uncertain: the resend may have run) and the
// server sees exactly two calls, never three.
func TestRedispatch_OneReconnectBound(t *testing.T) {
	for _, idem := range []string{"pure", "idempotent", "keyed"} {
		t.Run(idem, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, actTool(nil))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Times: 3})
			db := openDB(t)
			res := runAct(t, db, srv, idem, nil)
			if st := srv.Stats(); st.Calls["act"] != 2 || st.Initialize != 2 {
				t.Fatalf("server saw %d calls, %d initializations; want 2, 2", st.Calls["act"], st.Initialize)
			}
			if exitCode(res) != workflow.ExitUncertain {
				t.Fatalf("exit %d (%v), want 3", exitCode(res), res.Err)
			}
			c := callView(t, db, res.RunID)
			if c.Status != "uncertain" || c.Redispatches != 1 || c.Generation != 2 {
				t.Fatalf("call = %+v", c)
			}
			if got := describeRun(t, db, res.RunID); !slices.Contains(got, "call.error redispatched->uncertain") {
				t.Fatalf("events:\n%s", strings.Join(got, "\n"))
			}
		})
	}
}

// TestRedispatch_Triggers: timeout, transport loss and a malformed response
// follow the same rule as session expiry (one redispatch for pure,
// idempotent and keyed; uncertain for the others); a 5xx is never
// redispatched (uncertain) and isError is a definitive failure, for every
// class. keyed requests carry the same idempotency key on both sends; the
// other classes carry none.
func TestRedispatch_Triggers(t *testing.T) {
	type fault struct {
		name      string
		fault     func() mcptest.Fault
		ambiguous bool
		state     string // outcome for classes that are not redispatched
	}
	faults := []fault{
		{"timeout", func() mcptest.Fault {
			hang := make(chan struct{})
			t.Cleanup(func() { close(hang) })
			return mcptest.Fault{RPCMethod: "tools/call", Hang: hang, Nth: 1}
		}, true, "uncertain"},
		{"transport_loss", func() mcptest.Fault {
			// Retry 1 ms: resume at once, so the GET meets the 405 below (with the
			// default 1 s delay the 1 s timeout ended the call before any GET).
			return mcptest.Fault{RPCMethod: "tools/call", CloseAfterPriming: true, Retry: 1, Nth: 1}
		}, true, "uncertain"},
		{"malformed", func() mcptest.Fault {
			return mcptest.Fault{RPCMethod: "tools/call", Body: []byte(`{"jsonrpc":"2.0","id":`), Nth: 1}
		}, true, "uncertain"},
		{"5xx", func() mcptest.Fault {
			return mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusServiceUnavailable, Nth: 1}
		}, false, "uncertain"},
		{"isError", nil, false, "failed"},
	}
	for _, f := range faults {
		for _, idem := range classes {
			t.Run(f.name+"/"+idem, func(t *testing.T) {
				if f.name == "timeout" && testing.Short() {
					t.Skip("waits for a 1s timeout")
				}
				t.Parallel()
				var ml metaLog
				tool := actTool(&ml)
				if f.name == "isError" {
					tool.Handler = func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
						return &mcptest.Result{Content: mcptest.Text("no"), IsError: true}, nil
					}
				}
				srv := mcptest.Start(t, mcptest.Options{}, tool)
				if f.fault != nil {
					srv.Inject(f.fault())
				}
				if f.name == "transport_loss" {
					srv.Inject(mcptest.Fault{HTTPMethod: "GET", Status: http.StatusMethodNotAllowed})
				}
				db := openDB(t)
				wf := mustParse(t, strings.Replace(oneCall(srv.URL, "act", idem, `{n: 1}`), "timeoutSeconds: 30", "timeoutSeconds: 1", 1))
				res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				st := srv.Stats()
				c := callView(t, db, res.RunID)
				redo := f.ambiguous && redispatchable(idem)
				wantCalls, wantState, wantExit := 1, f.state, workflow.ExitUncertain
				if wantState == "failed" {
					wantExit = workflow.ExitFailed
				}
				if redo {
					wantCalls, wantState, wantExit = 2, "succeeded", 0
				}
				if st.Calls["act"] != wantCalls || c.Status != wantState || exitCode(res) != wantExit || c.Redispatches != wantCalls-1 {
					t.Fatalf("server saw %d calls, call %s (redispatches %d), exit %d (%v); want %d, %s, exit %d",
						st.Calls["act"], c.Status, c.Redispatches, exitCode(res), res.Err, wantCalls, wantState, wantExit)
				}
				if f.name == "isError" {
					return
				}
				metas := ml.get()
				for i, m := range metas {
					key, has := m[workflow.IdempotencyKeyMeta]
					if idem == "keyed" && key != c.EffectID {
						t.Errorf("keyed request %d: key %v, want %s", i+1, key, c.EffectID)
					}
					if idem != "keyed" && has {
						t.Errorf("%s request %d carries an idempotency key %v", idem, i+1, key)
					}
				}
				if (f.name == "transport_loss" || f.name == "malformed") && len(metas) != wantCalls {
					t.Errorf("handler ran %d times, want %d", len(metas), wantCalls)
				}
			})
		}
	}
}
