package workflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// openDB opens a fresh event log in a temporary directory.
func openDB(tb testing.TB) *events.DB {
	tb.Helper()
	return testkit.OpenDB(tb, "", events.Options{})
}

// oneCall is a workflow with one task calling tool on url.
func oneCall(url, tool, idem, args string) string {
	return testkit.Workflow{Name: "one-call", URL: url,
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: tool, Arguments: args}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.YAML()
}

func mustParse(tb testing.TB, src string) *spec.Workflow {
	tb.Helper()
	wf, err := spec.Parse("test.yaml", []byte(src))
	if err != nil {
		tb.Fatalf("parse: %v", err)
	}
	return wf
}

// runMoves returns the call transitions runID's log records (moves on
// facts, or call.transition events), with From set.
func runMoves(tb testing.TB, db *events.DB, runID string) []vocab.CallTransition {
	tb.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		tb.Fatal(err)
	}
	ts, err := projector.Transitions(evs)
	if err != nil {
		tb.Fatal(err)
	}
	return ts
}

func describeRun(tb testing.TB, db *events.DB, runID string) []string {
	tb.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]string, len(evs))
	var d projector.Describer
	for i, e := range evs {
		out[i] = d.Describe(e)
	}
	return out
}

func TestRun_OneCallEventSequence(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, mode := range []struct {
			name string
			opts demoserver.Options
		}{
			{"sse", demoserver.Options{}},
			{"json", demoserver.Options{JSONResponse: true}},
		} {
			t.Run(mode.name, func(t *testing.T) {
				srv, url := demotest.StartTest(t, mode.opts)
				db := b.Open(t, events.Options{})
				wf := mustParse(t, oneCall(url, "echo", "idempotent", `{message: hello}`))
				res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
				if err != nil || res.Err != nil {
					t.Fatalf("run: %v / %v", err, res.Err)
				}
				want := []string{
					"run.created",
					"task.started only",
					"mcp.request out initialize",
					"mcp.response in",
					"mcp.notification out notifications/initialized",
					"session.opened",
					"mcp.request out tools/list",
					"mcp.response in",
					"session.catalog",
					"call.prepared",
					"mcp.request out tools/call prepared->dispatched",
					"mcp.response in",
					"call.result dispatched->succeeded",
					"task.finished only succeeded",
					"run.finished succeeded",
				}
				got := describeRun(t, db, res.RunID)
				if strings.Join(got, "\n") != strings.Join(want, "\n") {
					t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				out, _ := json.Marshal(res.Outputs)
				if string(out) != `{"result":{"message":"hello"}}` {
					t.Fatalf("outputs = %s", out)
				}
				if n := srv.Calls("echo"); n != 1 {
					t.Fatalf("server ran echo %d times, want 1", n)
				}
				if _, err := db.VerifyRun(context.Background(), res.RunID); err != nil {
					t.Fatalf("verify: %v", err)
				}
			})
		}
	})
}

func TestRun_InspectDocument(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		_, url := demotest.StartTest(t, demoserver.Options{})
		db := b.Open(t, events.Options{})
		wf := mustParse(t, oneCall(url, "search", "pure", `{q: mcp}`))
		res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
		if err != nil || res.Err != nil {
			t.Fatalf("run: %v / %v", err, res.Err)
		}
		doc, err := projector.Inspect(context.Background(), db, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(doc)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"run", "tasks", "protocolSessions", "protocolCalls", "streamEvents"} {
			if _, ok := m[k]; !ok {
				t.Errorf("inspect lacks key %q", k)
			}
		}
		if len(doc.ProtocolCalls) != 1 || doc.ProtocolCalls[0].Status != "succeeded" || doc.ProtocolCalls[0].Idempotency != "pure" {
			t.Fatalf("calls = %+v", doc.ProtocolCalls)
		}
		if len(doc.ProtocolSessions) != 1 || doc.ProtocolSessions[0].Status != "initialized" || doc.ProtocolSessions[0].Generation != 1 {
			t.Fatalf("sessions = %+v", doc.ProtocolSessions)
		}
		if doc.Run.State != "succeeded" || doc.Run.Calls != 1 {
			t.Fatalf("run = %+v", doc.Run)
		}
	})
}

func TestRun_VersionMismatch(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{ProtocolVersion: "2099-01-01"}, mcptest.ToolDef{Name: "echo"})
	db := openDB(t)
	wf := mustParse(t, oneCall(srv.URL, "echo", "idempotent", `{}`))
	res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var we *workflow.Error
	if !errors.As(res.Err, &we) || we.Code != workflow.ExitRemote {
		t.Fatalf("err = %v, want exit %d", res.Err, workflow.ExitRemote)
	}
	if msg := res.Err.Error(); !strings.Contains(msg, "2099-01-01") || !strings.Contains(msg, "2025-11-25") {
		t.Fatalf("error should name both versions: %s", msg)
	}
	if st := srv.Stats(); st.Calls["echo"] != 0 {
		t.Fatalf("server saw %d calls", st.Calls["echo"])
	}
}
