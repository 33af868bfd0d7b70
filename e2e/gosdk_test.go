package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/workflow"
)

// goSDKModes are the transport modes of the official Go SDK server. A page
// size of 2 makes tools/list paginate: 7 tools take 4 pages.
var goSDKModes = []struct {
	name string
	opts demoserver.Options
	sse  bool
}{
	{"stateful-sse", demoserver.Options{PageSize: 2}, true},
	{"stateful-json", demoserver.Options{PageSize: 2, JSONResponse: true}, false},
	{"stateless-sse", demoserver.Options{PageSize: 2, Stateless: true}, true},
	{"stateless-json", demoserver.Options{PageSize: 2, Stateless: true, JSONResponse: true}, false},
}

// openSession is the log of opening a session whose tools/list takes pages pages.
func openSession(pages int) []string {
	out := []string{
		"mcp.request out initialize",
		"mcp.response in",
		"mcp.notification out notifications/initialized",
		"session.opened",
	}
	for range pages {
		out = append(out, "mcp.request out tools/list", "mcp.response in")
	}
	return append(out, "session.catalog")
}

// succeededCall is the log of one call answered with progress notifications first.
func succeededCall(progress int) []string {
	out := []string{"call.prepared", "mcp.request out tools/call prepared->dispatched"}
	for range progress {
		out = append(out, "mcp.notification in notifications/progress")
	}
	return append(out, "mcp.response in", "call.result dispatched->succeeded")
}

func concat(parts ...[]string) []string {
	var out []string
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func lines(l ...string) []string { return l }

// TestGoSDK_Modes runs a three-task workflow (search → get with the first
// output → analyze with progress) in every mode of the Go SDK server.
func TestGoSDK_Modes(t *testing.T) {
	for _, m := range goSDKModes {
		t.Run(m.name, func(t *testing.T) {
			srv, url := demotest.StartTest(t, m.opts)
			steps := []step{
				{id: "find", tool: "search", idem: "idempotent", args: "{q: mcp}"},
				{id: "fetch", tool: "get", idem: "pure", args: `{id: "${{ tasks.find.output.id }}"}`},
				{id: "say", tool: "echo", idem: "at_most_once", args: "{message: hi}"},
			}
			if m.sse {
				steps = append(steps, step{id: "count", tool: "analyze", idem: "pure", args: `{text: "a b c", steps: 3}`})
			}
			res, db := runWorkflow(t, context.Background(), workflowYAML(url, steps...), nil)
			if res.Err != nil {
				t.Fatalf("run failed (exit %d): %v", exitCode(res), res.Err)
			}
			want := concat(lines("run.created", "task.started find"), openSession(4), succeededCall(0), lines("task.finished find succeeded"),
				lines("task.started fetch"), succeededCall(0), lines("task.finished fetch succeeded"),
				lines("task.started say"), succeededCall(0), lines("task.finished say succeeded"))
			if m.sse {
				want = concat(want, lines("task.started count"), succeededCall(3), lines("task.finished count succeeded"))
			}
			want = append(want, "run.finished succeeded")
			assertEvents(t, db, res.RunID, want)
			verifyChain(t, db, res.RunID)

			id := demoserver.DocID("mcp")
			if got := outputString(t, res.Outputs["fetch"]); got != fmt.Sprintf(`{"body":"Document %[1]s is a demo document. Its id is %[1]s. The text of Document %[1]s is generated, not stored.","id":"%[1]s","title":"Document %[1]s"}`, id) {
				t.Errorf("fetch output = %s", got)
			}
			for _, tool := range []string{"search", "get", "echo"} {
				if n := srv.Calls(tool); n != 1 {
					t.Errorf("server ran %s %d times, want 1", tool, n)
				}
			}
			if m.sse {
				assertProgress(t, runEvents(t, db, res.RunID), 3, "step %d/3")
				if got := outputString(t, res.Outputs["count"]); got != `{"steps":3,"words":3}` {
					t.Errorf("count output = %s", got)
				}
			}
		})
	}
}

// TestGoSDK_ProgressNeedsSSE documents the peer's limit: with JSON responses
// the Go SDK cannot deliver progress, so analyze answers isError, and
// agentctl fails the call definitively (exit 4) after one execution.
func TestGoSDK_ProgressNeedsSSE(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{JSONResponse: true})
	res, db := runWorkflow(t, context.Background(), workflowYAML(url, step{id: "count", tool: "analyze", idem: "pure", args: `{text: "a b", steps: 2}`}), nil)
	if code := exitCode(res); code != workflow.ExitFailed {
		t.Fatalf("exit %d (%v), want %d", code, res.Err, workflow.ExitFailed)
	}
	if !strings.Contains(res.Err.Error(), `tool "analyze" returned isError`) {
		t.Errorf("error = %v", res.Err)
	}
	assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started count"), openSession(1),
		lines("call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.response in",
			"call.result", "call.error dispatched->failed", "task.finished count failed", "run.finished failed")))
	if n := srv.Calls("analyze"); n != 1 {
		t.Errorf("server ran analyze %d times, want 1", n)
	}
}

// assertProgress checks that the run persisted n progress notifications,
// numbered 1..n of n, before the tools/call response.
func assertProgress(tb testing.TB, evs []events.Event, n int, message string) {
	tb.Helper()
	var got []string
	respAt := -1
	lastProgress := -1
	for i, e := range evs {
		if !strings.HasPrefix(e.Type, vocab.FramePrefix) {
			continue
		}
		var f vocab.Frame
		if err := e.Decode(&f); err != nil {
			tb.Fatal(err)
		}
		if f.Method == "notifications/progress" {
			var p struct {
				Params struct {
					Progress float64 `json:"progress"`
					Total    float64 `json:"total"`
					Message  string  `json:"message"`
				} `json:"params"`
			}
			if err := json.Unmarshal(f.Body, &p); err != nil {
				tb.Fatalf("progress body %s: %v", f.Body, err)
			}
			got = append(got, fmt.Sprintf("%g/%g %s", p.Params.Progress, p.Params.Total, p.Params.Message))
			lastProgress = i
		}
		if f.Kind == "response" && f.Dir == "in" && lastProgress >= 0 && respAt < 0 {
			respAt = i
		}
	}
	var want []string
	for i := 1; i <= n; i++ {
		msg := ""
		if message != "" {
			msg = fmt.Sprintf(message, i)
		}
		want = append(want, fmt.Sprintf("%d/%d %s", i, n, msg))
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		tb.Fatalf("progress = %q, want %q", got, want)
	}
	if respAt < lastProgress {
		tb.Fatalf("no response persisted after the last progress (event %d)", lastProgress)
	}
}

func outputString(tb testing.TB, v any) string {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// TestGoSDK_OutputValidation: structuredContent is validated against the
// tool's outputSchema; a valid one becomes the output, an invalid one fails
// the call definitively (exit 4) and never enters workflow state.
func TestGoSDK_OutputValidation(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{})
	t.Run("valid", func(t *testing.T) {
		res, _ := runWorkflow(t, context.Background(), workflowYAML(url, step{id: "find", tool: "search", idem: "pure", args: "{q: schemas}"}), nil)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if got, want := outputString(t, res.Outputs["find"]), fmt.Sprintf(`{"id":"%s","score":0.9,"title":"About schemas"}`, demoserver.DocID("schemas")); got != want {
			t.Fatalf("output = %s, want %s", got, want)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		res, db := runWorkflow(t, context.Background(), workflowYAML(url, step{id: "bad", tool: "bad_output", idem: "pure"}), nil)
		if code := exitCode(res); code != workflow.ExitFailed {
			t.Fatalf("exit %d (%v), want %d", code, res.Err, workflow.ExitFailed)
		}
		assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started bad"), openSession(1),
			lines("call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.response in",
				"call.result", "call.error dispatched->failed", "task.finished bad failed", "run.finished failed")))
		errs := decodeAll[vocab.CallError](t, runEvents(t, db, res.RunID), vocab.TypeCallError)
		if len(errs) != 1 || errs[0].Kind != "invalid_output" || !strings.Contains(errs[0].Message, `"/n"`) {
			t.Fatalf("call.error = %+v, want one invalid_output at /n", errs)
		}
		if len(res.Outputs) != 0 {
			t.Fatalf("outputs = %v, want none", res.Outputs)
		}
		if n := srv.Calls("bad_output"); n != 1 {
			t.Fatalf("server ran bad_output %d times, want 1", n)
		}
	})
}

// TestGoSDK_IsError: an isError result fails the call definitively (exit 4),
// carrying the tool's text, and is never resent even when idempotent.
func TestGoSDK_IsError(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{})
	res, db := runWorkflow(t, context.Background(), workflowYAML(url, step{id: "boom", tool: "fail", idem: "idempotent", args: "{message: disk on fire}"}), nil)
	if code := exitCode(res); code != workflow.ExitFailed {
		t.Fatalf("exit %d (%v), want %d", code, res.Err, workflow.ExitFailed)
	}
	if !strings.Contains(res.Err.Error(), "disk on fire") {
		t.Errorf("error should carry the tool's text: %v", res.Err)
	}
	assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started boom"), openSession(1),
		lines("call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.response in",
			"call.result", "call.error dispatched->failed", "task.finished boom failed", "run.finished failed")))
	if n := srv.Calls("fail"); n != 1 {
		t.Fatalf("server ran fail %d times, want 1", n)
	}
}

// startHooked serves a demoserver on 127.0.0.1 behind hook, which runs
// before each POST carrying a tools/call reaches the SDK handler, with the
// 1-based number of that tools/call.
func startHooked(tb testing.TB, opts demoserver.Options, hook func(n int64)) (*demoserver.Server, string) {
	tb.Helper()
	s := demoserver.New(opts)
	var calls atomic.Int64
	h := s.Handler()
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			m, err := jsonRPCMethod(r)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			if m == "tools/call" {
				hook(calls.Add(1))
			}
		}
		h.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen on 127.0.0.1: %v", err)
	}
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	hs.Start()
	tb.Cleanup(func() {
		for ss := range s.MCPServer().Sessions() {
			_ = ss.Close()
		}
		hs.CloseClientConnections()
		hs.Close()
	})
	return s, hs.URL + "/mcp"
}

func sessionCount(s *demoserver.Server) int {
	n := 0
	for range s.MCPServer().Sessions() {
		n++
	}
	return n
}

// TestGoSDK_SessionExpiry: the session dies between two tasks, so the second
// task's tools/call is answered 404. An idempotent call reconnects (generation
// 2, tools/list refreshed, schema unchanged) and is sent once more; an
// at_most_once call ends uncertain (exit 3) and is never resent.
//
// The session ends either by being closed server-side (the Go SDK then
// forgets it) or by SessionTimeout, waited for by polling the server's
// session table, bounded, never by a fixed sleep.
func TestGoSDK_SessionExpiry(t *testing.T) {
	const timeout = 300 * time.Millisecond
	expirers := []struct {
		name   string
		opts   demoserver.Options
		expire func(tb testing.TB, s *demoserver.Server)
	}{
		{"closed", demoserver.Options{}, func(tb testing.TB, s *demoserver.Server) {
			for ss := range s.MCPServer().Sessions() {
				if err := ss.Close(); err != nil {
					tb.Errorf("close session: %v", err)
				}
			}
		}},
		{"timeout", demoserver.Options{SessionTimeout: timeout}, func(tb testing.TB, s *demoserver.Server) {
			deadline := time.Now().Add(50 * timeout)
			tick := time.NewTicker(timeout / 10)
			defer tick.Stop()
			for sessionCount(s) > 0 {
				if time.Now().After(deadline) {
					tb.Errorf("session did not expire within %v", 50*timeout)
					return
				}
				<-tick.C
			}
		}},
	}
	for _, ex := range expirers {
		t.Run(ex.name+"/idempotent", func(t *testing.T) {
			var expired atomic.Bool
			var srv *demoserver.Server
			srv, url := startHooked(t, ex.opts, func(n int64) {
				if n == 2 {
					ex.expire(t, srv)
					expired.Store(true)
				}
			})
			res, db := runWorkflow(t, context.Background(), workflowYAML(url,
				step{id: "first", tool: "echo", idem: "idempotent", args: "{message: one}"},
				step{id: "second", tool: "counter", idem: "idempotent"},
			), nil)
			if res.Err != nil {
				t.Fatalf("run failed (exit %d): %v", exitCode(res), res.Err)
			}
			if !expired.Load() {
				t.Fatal("the session was never expired")
			}
			assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started first"), openSession(1), succeededCall(0),
				lines("task.finished first succeeded", "task.started second",
					"call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.http_error in tools/call",
					"session.expired", "call.error dispatched->reconnecting"),
				openSession(1),
				lines("mcp.request out tools/call reconnecting->redispatched", "mcp.response in",
					"call.result redispatched->succeeded", "task.finished second succeeded", "run.finished succeeded")))
			evs := runEvents(t, db, res.RunID)
			opened := decodeAll[vocab.SessionOpened](t, evs, vocab.TypeSessionOpened)
			if len(opened) != 2 || opened[0].Generation != 1 || opened[1].Generation != 2 || opened[1].TaskID != "second" {
				t.Fatalf("sessions = %+v, want generations 1 and 2", opened)
			}
			errs := decodeAll[vocab.CallError](t, evs, vocab.TypeCallError)
			if len(errs) != 1 || errs[0].Kind != "session_expired" || errs[0].Status != 404 {
				t.Fatalf("call.error = %+v, want one session_expired (404)", errs)
			}
			// The 404 reached no handler: the resend is the only execution.
			if n := srv.Calls("counter"); n != 1 {
				t.Fatalf("server ran counter %d times, want 1", n)
			}
			if got := outputString(t, res.Outputs["second"]); got != `{"count":1}` {
				t.Fatalf("second output = %s", got)
			}
			verifyChain(t, db, res.RunID)
		})
		t.Run(ex.name+"/at_most_once", func(t *testing.T) {
			var srv *demoserver.Server
			srv, url := startHooked(t, ex.opts, func(n int64) {
				if n == 2 {
					ex.expire(t, srv)
				}
			})
			res, db := runWorkflow(t, context.Background(), workflowYAML(url,
				step{id: "first", tool: "counter", idem: "at_most_once"},
				step{id: "second", tool: "counter", idem: "at_most_once"},
			), nil)
			if code := exitCode(res); code != workflow.ExitUncertain || res.State != workflow.StateUncertain {
				t.Fatalf("exit %d state %s (%v), want %d uncertain", code, res.State, res.Err, workflow.ExitUncertain)
			}
			assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started first"), openSession(1), succeededCall(0),
				lines("task.finished first succeeded", "task.started second",
					"call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.http_error in tools/call",
					"session.expired", "call.error dispatched->uncertain",
					"task.finished second uncertain", "run.finished uncertain")))
			// Exactly one execution: the first task's. The expired request
			// ran nowhere and was not resent.
			if n := srv.Calls("counter"); n != 1 {
				t.Fatalf("server ran counter %d times, want exactly 1", n)
			}
			verifyChain(t, db, res.RunID)
		})
	}
}
