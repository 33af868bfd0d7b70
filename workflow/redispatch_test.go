package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// classes is every idempotency class, redispatchable first.
var classes = []string{"pure", "idempotent", "keyed", "at_most_once", "unknown"}

func redispatchable(idem string) bool {
	return idem == "pure" || idem == "idempotent" || idem == "keyed"
}

// metaLog collects the params._meta of every request a handler executed.
type metaLog struct {
	mu  sync.Mutex
	all []map[string]any
}

func (l *metaLog) add(raw json.RawMessage) {
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.all = append(l.all, m)
}

func (l *metaLog) get() []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.all)
}

// actTool is the tool the redispatch tests call; metas, when not nil,
// collects the params._meta of every request the handler executed.
func actTool(metas *metaLog) mcptest.ToolDef {
	return mcptest.ToolDef{Name: "act",
		InputSchema:  json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"done":{"type":"boolean"}},"required":["done"]}`),
		Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			if metas != nil {
				metas.add(c.Meta)
			}
			return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
		}}
}

// runAct runs the one-task workflow against srv and returns the result.
func runAct(t *testing.T, db *events.DB, srv *mcptest.Server, idem string, observe func(events.Event)) *workflow.Result {
	t.Helper()
	wf := mustParse(t, oneCall(srv.URL, "act", idem, `{n: 1}`))
	res, err := (&workflow.Runner{DB: db, Observe: observe}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return res
}

func exitCode(res *workflow.Result) int {
	var we *workflow.Error
	if errors.As(res.Err, &we) {
		return we.Code
	}
	return 0
}

func callView(t *testing.T, db *events.DB, runID string) projector.CallView {
	t.Helper()
	doc, err := projector.Inspect(context.Background(), db, runID)
	if err != nil {
		t.Fatal(err)
	}
	if len(doc.ProtocolCalls) != 1 {
		t.Fatalf("calls = %+v", doc.ProtocolCalls)
	}
	return doc.ProtocolCalls[0]
}

// TestRedispatch_ServerRestart: a 404 on the first tools/call (the server
// forgot the session) is redispatched on generation 2 for pure, idempotent
// and keyed, and leaves at_most_once and unknown uncertain with one call.
func TestRedispatch_ServerRestart(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, idem := range classes {
			t.Run(idem, func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{}, actTool(nil))
				srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
				db := b.Open(t, events.Options{})
				res := runAct(t, db, srv, idem, nil)
				st := srv.Stats()
				got := describeRun(t, db, res.RunID)
				c := callView(t, db, res.RunID)
				if !redispatchable(idem) {
					if exitCode(res) != workflow.ExitUncertain || res.State != workflow.StateUncertain {
						t.Fatalf("state %s exit %d err %v; want uncertain, exit 3", res.State, exitCode(res), res.Err)
					}
					var ue *workflow.UncertainError
					if !errors.As(res.Err, &ue) || ue.EffectID != c.EffectID || !strings.Contains(res.Err.Error(), "agentctl effects reconcile "+c.EffectID) ||
						!strings.Contains(res.Err.Error(), "agentctl resume "+res.RunID) {
						t.Fatalf("error does not say how to reconcile: %v", res.Err)
					}
					if st.Calls["act"] != 1 || st.Initialize != 1 {
						t.Fatalf("server saw %d calls, %d initializations; want 1, 1", st.Calls["act"], st.Initialize)
					}
					if c.Status != "uncertain" || c.Generation != 1 || c.Redispatches != 0 {
						t.Fatalf("call = %+v", c)
					}
					if !slices.Contains(got, "call.error dispatched->uncertain") {
						t.Fatalf("events:\n%s", strings.Join(got, "\n"))
					}
					return
				}
				if res.Err != nil {
					t.Fatalf("run: %v", res.Err)
				}
				if st.Calls["act"] != 2 || st.Initialize != 2 || st.Executed["act"] != 1 {
					t.Fatalf("server saw %d calls (%d executed), %d initializations; want 2 (1), 2", st.Calls["act"], st.Executed["act"], st.Initialize)
				}
				if c.Status != "succeeded" || c.Generation != 2 || c.Redispatches != 1 {
					t.Fatalf("call = %+v", c)
				}
				var ids []string
				for _, r := range st.Requests {
					if r.RPCMethod == "tools/call" {
						ids = append(ids, string(r.ID))
					}
				}
				if len(ids) != 2 || ids[0] == ids[1] {
					t.Fatalf("tools/call JSON-RPC ids = %v; the redispatch must carry a new id", ids)
				}
				want := []string{
					"mcp.request out tools/call prepared->dispatched",
					"mcp.http_error in tools/call",
					"session.expired",
					"call.error dispatched->reconnecting",
					"mcp.request out initialize",
					"mcp.response in",
					"mcp.notification out notifications/initialized",
					"session.opened",
					"mcp.request out tools/list",
					"mcp.response in",
					"session.catalog",
					"mcp.request out tools/call reconnecting->redispatched",
				}
				i := slices.Index(got, "call.prepared")
				if i < 0 || len(got) < i+1+len(want) || !slices.Equal(got[i+1:i+1+len(want)], want) {
					t.Fatalf("events:\n%s\nwant after call.prepared:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				doc, _ := projector.Inspect(context.Background(), db, res.RunID)
				if n := len(doc.ProtocolSessions); n != 2 || doc.ProtocolSessions[1].Generation != 2 || doc.ProtocolSessions[1].Status != "reinitialized" ||
					doc.ProtocolSessions[0].Status != "expired" {
					t.Fatalf("sessions = %+v", doc.ProtocolSessions)
				}
			})
		}
	})
}

// TestRedispatch_DeclarationOnly: the class comes from the workflow alone.
// A bad class is a parse error naming file:line, and tool annotations
// claiming idempotency never make an unknown call redispatchable.
func TestRedispatch_DeclarationOnly(t *testing.T) {
	_, err := spec.Parse("test.yaml", []byte(oneCall("http://127.0.0.1:1/mcp", "act", "sometimes", `{}`)))
	if err == nil || !strings.Contains(err.Error(), "test.yaml:11:") || !strings.Contains(err.Error(), "sometimes") {
		t.Fatalf("parse error = %v; want test.yaml:11 naming the value", err)
	}
	tool := actTool(nil)
	tool.Annotations = json.RawMessage(`{"idempotentHint":true,"readOnlyHint":true,"destructiveHint":false}`)
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
	db := openDB(t)
	res := runAct(t, db, srv, "unknown", nil)
	if exitCode(res) != workflow.ExitUncertain || srv.Stats().Calls["act"] != 1 {
		t.Fatalf("exit %d, %d calls; want 3, 1", exitCode(res), srv.Stats().Calls["act"])
	}
	// Identity columns are immutable in the database as well.
	if _, err := db.SQL().Exec(`UPDATE protocol_calls SET idempotency = 'pure' WHERE run_id = ?`, res.RunID); err == nil ||
		!strings.Contains(err.Error(), "immutable") {
		t.Fatalf("identity update: err = %v", err)
	}
}
