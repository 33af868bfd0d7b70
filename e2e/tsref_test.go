package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/tspeer"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

// tsTools are the tools the reference server lists to a client that
// declares no capabilities, sorted.
const tsTools = "echo, get-annotated-message, get-env, get-resource-links, get-resource-reference, get-structured-content, get-sum, " +
	"get-tiny-image, gzip-file-as-resource, simulate-research-query, toggle-simulated-logging, toggle-subscriber-updates, trigger-long-running-operation"

// notSent is the log of a call that fails before any request is sent.
func notSent(task string) []string {
	return lines("call.prepared", "call.error prepared->failed", "task.finished "+task+" failed", "run.finished failed")
}

// TestTSEverything runs workflows against the reference TypeScript server
// through workflow.Runner. The server is started once (about a second) and
// shared: every run opens its own session.
func TestTSEverything(t *testing.T) {
	url := tspeer.Start(t)
	ctx := context.Background()

	t.Run("echo", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, workflowYAML(url, step{id: "say", tool: "echo", idem: "pure", args: "{message: hello}"}), nil)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started say"), openSession(1), succeededCall(0),
			lines("task.finished say succeeded", "run.finished succeeded")))
		// No structuredContent: the output is the content array.
		if got := outputString(t, res.Outputs["say"]); got != `[{"text":"Echo: hello","type":"text"}]` {
			t.Fatalf("output = %s", got)
		}
		opened := decodeAll[vocab.SessionOpened](t, runEvents(t, db, res.RunID), vocab.TypeSessionOpened)
		if len(opened) != 1 || opened[0].ProtocolVersion != "2025-11-25" || !strings.Contains(string(opened[0].ServerInfo), `"mcp-servers/everything"`) || opened[0].SessionIDDigest == "" {
			t.Fatalf("session.opened = %+v", opened)
		}
		verifyChain(t, db, res.RunID)
	})

	t.Run("get-sum/valid", func(t *testing.T) {
		res, _ := runWorkflow(t, ctx, workflowYAML(url, step{id: "sum", tool: "get-sum", idem: "pure", args: "{a: 2, b: 3.5}"}), nil)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		if got := outputString(t, res.Outputs["sum"]); got != `[{"text":"The sum of 2 and 3.5 is 5.5.","type":"text"}]` {
			t.Fatalf("output = %s", got)
		}
	})

	// Arguments that violate the advertised inputSchema never leave: the
	// call fails before dispatch (exit 4), which the server's own zod
	// check (isError) could only confirm.
	t.Run("get-sum/invalid", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, workflowYAML(url, step{id: "sum", tool: "get-sum", idem: "pure", args: "{a: two, b: 3}"}), nil)
		if code := exitCode(res); code != workflow.ExitFailed {
			t.Fatalf("exit %d (%v), want %d", code, res.Err, workflow.ExitFailed)
		}
		assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started sum"), openSession(1), notSent("sum")))
		errs := decodeAll[vocab.CallError](t, runEvents(t, db, res.RunID), vocab.TypeCallError)
		if len(errs) != 1 || errs[0].Kind != "invalid_arguments" || !strings.Contains(errs[0].Message, `"/a"`) {
			t.Fatalf("call.error = %+v, want invalid_arguments at /a", errs)
		}
	})

	// Arguments the schema allows but the handler refuses: the server
	// answers isError, the call fails definitively (exit 4), not resent.
	t.Run("isError", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, workflowYAML(url, step{id: "ref", tool: "get-resource-reference", idem: "idempotent", args: "{resourceId: 0}"}), nil)
		if code := exitCode(res); code != workflow.ExitFailed {
			t.Fatalf("exit %d (%v), want %d", code, res.Err, workflow.ExitFailed)
		}
		if !strings.Contains(res.Err.Error(), "Invalid resourceId: 0") {
			t.Errorf("error should carry the server's text: %v", res.Err)
		}
		assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started ref"), openSession(1),
			lines("call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.response in",
				"call.result", "call.error dispatched->failed", "task.finished ref failed", "run.finished failed")))
	})

	// The outputSchema declares "$schema": draft-07; structuredContent is
	// validated against it and becomes the output, used by a later task.
	t.Run("get-structured-content", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, workflowYAML(url,
			step{id: "weather", tool: "get-structured-content", idem: "pure", args: "{location: Chicago}"},
			step{id: "sum", tool: "get-sum", idem: "pure", args: `{a: "${{ tasks.weather.output.temperature }}", b: "${{ tasks.weather.output.humidity }}"}`},
		), nil)
		if res.Err != nil {
			t.Fatalf("exit %d: %v", exitCode(res), res.Err)
		}
		if got := outputString(t, res.Outputs["weather"]); got != `{"conditions":"Light rain / drizzle","humidity":82,"temperature":36}` {
			t.Fatalf("weather output = %s", got)
		}
		if got := outputString(t, res.Outputs["sum"]); got != `[{"text":"The sum of 36 and 82 is 118.","type":"text"}]` {
			t.Fatalf("sum output = %s", got)
		}
		cat := decodeAll[vocab.SessionCatalog](t, runEvents(t, db, res.RunID), vocab.TypeSessionCatalog)
		if len(cat) != 1 || !strings.Contains(string(toolInfo(cat[0], "get-structured-content").OutputSchema), "draft-07") {
			t.Fatalf("catalog lacks the draft-07 outputSchema: %+v", cat)
		}
	})

	t.Run("trigger-long-running-operation", func(t *testing.T) {
		// The observer (what the CLI uses to show progress) sees each event
		// as it is committed, so progress reaches it while the call runs.
		var live []string
		var d projector.Describer
		observe := func(e events.Event) { live = append(live, d.Describe(e)) }
		res, db := runWorkflow(t, ctx, workflowYAML(url, step{id: "op", tool: "trigger-long-running-operation", idem: "pure", args: "{duration: 0.4, steps: 4}"}), observe)
		if res.Err != nil {
			t.Fatal(res.Err)
		}
		want := concat(lines("run.created", "task.started op"), openSession(1), succeededCall(4), lines("task.finished op succeeded", "run.finished succeeded"))
		assertEvents(t, db, res.RunID, want)
		if strings.Join(live, "\n") != strings.Join(want, "\n") {
			t.Fatalf("observer saw:\n%s", numbered(live))
		}
		assertProgress(t, runEvents(t, db, res.RunID), 4, "")
		if got := outputString(t, res.Outputs["op"]); got != `[{"text":"Long running operation completed. Duration: 0.4 seconds, Steps: 4.","type":"text"}]` {
			t.Fatalf("output = %s", got)
		}
	})

	// A task-required tool is called as an MCP task: one tools/call, then
	// tasks/get until completed, then tasks/result; inspect shows the task.
	t.Run("simulate-research-query", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, workflowYAML(url, step{id: "research", tool: "simulate-research-query", idem: "at_most_once", args: "{topic: mcp}"}), nil)
		if res.Err != nil || res.State != workflow.StateSucceeded {
			t.Fatalf("run: %s %v", res.State, res.Err)
		}
		evs := runEvents(t, db, res.RunID)
		if n := len(frames(t, evs, "tools/call")); n != 1 {
			t.Fatalf("%d tools/call frames, want 1", n)
		}
		if n := len(frames(t, evs, "tasks/result")); n != 1 {
			t.Fatalf("%d tasks/result frames, want 1", n)
		}
		doc, err := projector.Inspect(ctx, db, res.RunID)
		if err != nil {
			t.Fatal(err)
		}
		task := doc.ProtocolCalls[0].Task
		if task == nil || task.TaskIDDigest == "" || task.Polls < 1 || len(task.History) < 2 || task.History[len(task.History)-1].Status != "completed" {
			b, _ := json.Marshal(task)
			t.Fatalf("inspect task = %s", b)
		}
		if out := outputString(t, res.Outputs["research"]); !strings.Contains(out, "mcp") {
			t.Fatalf("output = %s", out)
		}
	})

	t.Run("unknown-tool", func(t *testing.T) {
		res, db := runWorkflow(t, ctx, workflowYAML(url, step{id: "x", tool: "nope", idem: "pure"}), nil)
		if code := exitCode(res); code != workflow.ExitFailed {
			t.Fatalf("exit %d (%v), want %d", code, res.Err, workflow.ExitFailed)
		}
		want := fmt.Sprintf(`tool "nope" not found on server "peer"; available: %s`, tsTools)
		if !strings.Contains(res.Err.Error(), want) {
			t.Fatalf("error = %s\nwant it to contain %s", res.Err, want)
		}
		assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started x"), openSession(1), lines("task.finished x failed", "run.finished failed")))
	})

	// The reference server answers 400 (not 404) for a session it does not
	// know. A proxy deletes the session upstream just before the second
	// task's tools/call: agentctl must classify the 400 as a definitive
	// http_status failure (the server refused it before any handler ran),
	// not as session expiry: no session.expired, no generation 2, no
	// resend even for an idempotent call; exit 6 (remote/protocol).
	t.Run("unknown-session-400", func(t *testing.T) {
		proxy, deleted := deletingProxy(t, url, 2)
		res, db := runWorkflow(t, ctx, workflowYAML(proxy,
			step{id: "first", tool: "echo", idem: "idempotent", args: "{message: one}"},
			step{id: "second", tool: "echo", idem: "idempotent", args: "{message: two}"},
		), nil)
		if deleted.Load() != 1 {
			t.Fatalf("proxy deleted %d sessions, want 1", deleted.Load())
		}
		if code := exitCode(res); code != workflow.ExitRemote {
			t.Fatalf("exit %d (%v), want %d", code, res.Err, workflow.ExitRemote)
		}
		assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started first"), openSession(1), succeededCall(0),
			lines("task.finished first succeeded", "task.started second",
				"call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.http_error in tools/call",
				"call.error dispatched->failed", "task.finished second failed", "run.finished failed")))
		errs := decodeAll[vocab.CallError](t, runEvents(t, db, res.RunID), vocab.TypeCallError)
		if len(errs) != 1 || errs[0].Kind != "http_status" || errs[0].Status != 400 || !strings.Contains(errs[0].Message, "No valid session ID") {
			t.Fatalf("call.error = %+v, want one http_status 400", errs)
		}
		trs := transitions(t, runEvents(t, db, res.RunID))
		if last := trs[len(trs)-1]; last.Trigger != "fail_definitive" || last.To != "failed" {
			t.Fatalf("last transition = %+v, want fail_definitive → failed", last)
		}
	})
}

func toolInfo(c vocab.SessionCatalog, name string) vocab.ToolInfo {
	for _, t := range c.Tools {
		if t.Name == name {
			return t
		}
	}
	return vocab.ToolInfo{}
}

// deletingProxy is a loopback reverse proxy to upstream that, just before
// forwarding the nth tools/call, ends the caller's session upstream with
// DELETE (as a server restart or eviction would). It reports how many
// sessions it deleted.
func deletingProxy(tb testing.TB, upstream string, nth int64) (string, *atomic.Int64) {
	tb.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1 // SSE: pass every event through at once
	var calls, deleted atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && isToolsCall(tb, r) && calls.Add(1) == nth {
			req, err := http.NewRequest(http.MethodDelete, upstream, nil)
			if err != nil {
				tb.Error(err)
			} else {
				req.Header.Set("Mcp-Session-Id", r.Header.Get("Mcp-Session-Id"))
				req.Header.Set("MCP-Protocol-Version", r.Header.Get("MCP-Protocol-Version"))
				resp, err := http.DefaultClient.Do(req)
				switch {
				case err != nil:
					tb.Errorf("DELETE session upstream: %v", err)
				case resp.StatusCode != http.StatusOK:
					resp.Body.Close()
					tb.Errorf("DELETE session upstream: http %d", resp.StatusCode)
				default:
					resp.Body.Close()
					deleted.Add(1)
				}
			}
		}
		rp.ServeHTTP(w, r)
	})
	hs := httptest.NewServer(h) // httptest binds 127.0.0.1
	tb.Cleanup(hs.Close)
	return hs.URL + u.Path, &deleted
}

// isToolsCall peeks at a POST body and restores it.
func isToolsCall(tb testing.TB, r *http.Request) bool {
	m, err := jsonRPCMethod(r)
	if err != nil {
		tb.Errorf("read request body: %v", err)
	}
	return m == "tools/call"
}
