package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
	"github.com/agentctl/agentctl/workflow/replay/replaytest"
)

// TestReplay_TaskCalls: runs whose call went out as an MCP task, in every
// way such a call ends, replay from the log alone: the same exit code,
// state, outputs and inspect document (task id, status history, poll
// counts, cancel) as the source; the server sees no request during the
// replays; two replays record the same events; a replay of the replay
// equals the source too.
func TestReplay_TaskCalls(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, tc := range []struct {
			name    string
			handler mcptest.Handler
			idem    string
			polls   int
			faults  []mcptest.Fault
			expire  bool
			cancel  bool // the user's ^C once the task is working
			exit    int
			state   string // the call's final state
			want    []string
		}{
			{name: "completed after folded polls", idem: "at_most_once", polls: 3, exit: workflow.ExitOK, state: "succeeded",
				want: []string{"call.task_status", "call.result"}},
			{name: "failed", idem: "at_most_once", polls: 1, handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				return nil, errors.New("no sources")
			}, exit: workflow.ExitFailed, state: "failed", want: []string{"call.result"}},
			{name: "json-rpc error from tasks/result", idem: "idempotent", polls: 1, handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				return nil, &mcptest.RPCError{Code: -32001, Message: "backend down"}
			}, exit: workflow.ExitFailed, state: "failed", want: []string{"call.error"}},
			{name: "result violates the output schema", idem: "pure", polls: 1, handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				return &mcptest.Result{Content: []map[string]any{}, StructuredContent: map[string]any{"n": "many"}}, nil
			}, exit: workflow.ExitFailed, state: "failed", want: []string{"call.result", "call.error"}},
			{name: "cancelled by the server", idem: "at_most_once", polls: 1, handler: func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
				mcptest.SetTaskStatus(ctx, mcptest.TaskCancelled, "stopped by an operator")
				return &mcptest.Result{}, nil
			}, exit: workflow.ExitFailed, state: "failed", want: []string{"move polling->failed"}},
			{name: "input required then tasks/cancel", idem: "at_most_once", polls: 1, handler: func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
				mcptest.SetTaskStatus(ctx, mcptest.TaskInputRequired, "which topic?")
				return &mcptest.Result{}, nil
			}, exit: workflow.ExitUncertain, state: "uncertain", want: []string{"move polling->input_required", "call.task_cancel"}},
			{name: "poll answered 502 then asked again", idem: "at_most_once", polls: 2,
				faults: []mcptest.Fault{{RPCMethod: "tasks/get", Nth: 2, Status: http.StatusBadGateway}},
				exit:   workflow.ExitOK, state: "succeeded", want: []string{"move polling->polling", "call.result"}},
			{name: "expired at_most_once", idem: "at_most_once", polls: 1, expire: true, exit: workflow.ExitUncertain, state: "uncertain",
				want: []string{"move accepted->uncertain"}},
			{name: "expired idempotent sent again as a new task", idem: "idempotent", polls: 1, expire: true, exit: workflow.ExitOK, state: "succeeded",
				want: []string{"move redispatched->accepted"}},
			{name: "session 404 keyed sent again on a new session", idem: "keyed", polls: 1,
				faults: []mcptest.Fault{{RPCMethod: "tasks/get", Nth: 1, Status: http.StatusNotFound}},
				exit:   workflow.ExitOK, state: "succeeded", want: []string{"session.expired", "move redispatched->accepted"}},
			{name: "user cancel confirmed", idem: "at_most_once", polls: 1000, cancel: true, exit: workflow.ExitCancelled, state: "cancelled",
				want: []string{"call.task_cancel"}},
			{name: "user cancel unconfirmed", idem: "at_most_once", polls: 1000, cancel: true, exit: workflow.ExitCancelled, state: "uncertain",
				faults: []mcptest.Fault{{RPCMethod: "tasks/cancel", Nth: 1, Status: http.StatusInternalServerError}}, want: []string{"call.task_cancel"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: tc.polls, PollInterval: 10}}, researchTool(tc.handler))
				for _, f := range tc.faults {
					srv.Inject(f)
				}
				db := b.Open(t, events.Options{})
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				expired := false
				obs := func(e events.Event) {
					if tc.expire && !expired && e.Type == vocab.TypeCallTaskAccepted {
						expired = true
						srv.ExpireTasks()
					}
					if tc.cancel && strings.HasSuffix(projector.Describe(e), "->polling") { // the first poll found it working
						cancel()
					}
				}
				src, err := (&workflow.Runner{DB: db, Observe: obs}).Run(ctx, mustParse(t, taskWorkflow(srv.URL, "research", tc.idem, "")), nil, workflow.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				srcDoc := replaytest.InspectDoc(t, db, src.RunID)
				if src.ExitCode != tc.exit || srcDoc.ProtocolCalls[0].Status != tc.state {
					t.Fatalf("source exit %d, call %s: %v; want exit %d, %s", src.ExitCode, srcDoc.ProtocolCalls[0].Status, src.Err, tc.exit, tc.state)
				}
				srcLog := describeRun(t, db, src.RunID)
				for _, w := range tc.want {
					if !slices.ContainsFunc(srcLog, func(l string) bool { return l == w || strings.HasPrefix(l, w+" ") }) && !hasMove(srcLog, w) {
						t.Fatalf("source log lacks %q:\n%s", w, strings.Join(srcLog, "\n"))
					}
				}
				before := len(srv.Stats().Requests)

				rep := replaytest.Replay(t, db, src.RunID)
				if rep.State != src.State || rep.ExitCode != src.ExitCode || !reflect.DeepEqual(rep.Outputs, src.Outputs) {
					t.Fatalf("replay = %s (exit %d) %v %v, source = %s (exit %d) %v %v", rep.State, rep.ExitCode, rep.Outputs, rep.Err, src.State, src.ExitCode, src.Outputs, src.Err)
				}
				if src.Err != nil && (rep.Err == nil || rep.Err.Error() != strings.ReplaceAll(src.Err.Error(), src.RunID, rep.RunID)) && !strings.Contains(rep.Err.Error(), "task") {
					t.Fatalf("replay error %v, source %v", rep.Err, src.Err)
				}
				want, _ := replaytest.NormalInspect(t, db, src.RunID)
				got, repDoc := replaytest.NormalInspect(t, db, rep.RunID)
				if got != want {
					t.Fatalf("inspect of replay differs from the source's:\n--- replay\n%s\n--- source\n%s", got, want)
				}
				if repDoc.ProtocolCalls[0].Task == nil {
					t.Fatalf("replay inspect shows no task")
				}
				rep2 := replaytest.Replay(t, db, src.RunID)
				if a, b := only(describeRun(t, db, rep.RunID), "call.", "replay.", "session."), only(describeRun(t, db, rep2.RunID), "call.", "replay.", "session."); !slices.Equal(a, b) {
					t.Fatalf("two replays differ:\n%s\n---\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
				}
				rep3 := replaytest.Replay(t, db, rep.RunID)
				// Its frames are the source's: a keyed call's idempotency key in
				// them is the source's effect id.
				got3, _ := replaytest.NormalInspect(t, db, rep3.RunID)
				if got3 = strings.ReplaceAll(got3, srcDoc.ProtocolCalls[0].EffectID, "<effect-0>"); got3 != want {
					t.Fatalf("replay of the replay differs:\n%s\n--- source\n%s", got3, want)
				}
				if after := len(srv.Stats().Requests); after != before {
					t.Fatalf("the server saw %d requests during the replays", after-before)
				}
			})
		}
	})
}

// TestReplay_TaskDivergence: a replay never invents an answer about a
// task. With the source's requests about the task cut short (the
// tasks/result, or every poll), or the workflow asking other arguments,
// the replay fails with a DivergenceError naming the task and what was
// recorded, sends nothing, and ends failed (exit 4), not uncertain.
func TestReplay_TaskDivergence(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 2, PollInterval: 10}}, researchTool(nil))
	db := openDB(t)
	src := runTask(t, db, taskWorkflow(srv.URL, "research", "at_most_once", ""), nil)
	if src.Err != nil {
		t.Fatal(src.Err)
	}
	before := len(srv.Stats().Requests)
	for _, tc := range []struct {
		name     string
		cut      int    // recorded requests about the task forgotten
		topic    string // the replayed workflow's argument
		field    string
		recorded string // in DivergenceError.Recorded
	}{
		{name: "tasks/result cut", cut: 1, topic: "x", field: "task", recorded: "2 request(s) about task sha256:"},
		{name: "every request cut", cut: 99, topic: "x", field: "task", recorded: "0 request(s) about task sha256:"},
		{name: "other arguments", topic: "y", field: "argumentsDigest", recorded: "sha256:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rp, err := replay.Prepare(context.Background(), db, src.RunID)
			if err != nil {
				t.Fatal(err)
			}
			replay.TruncateTaskSteps(rp.Dialer, tc.cut)
			wf := mustParse(t, strings.Replace(taskWorkflow(srv.URL, "research", "at_most_once", ""), "topic: x", "topic: "+tc.topic, 1))
			res, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(context.Background(), wf, rp.Inputs, workflow.RunOptions{Mode: "replay", SourceRunID: src.RunID})
			if err != nil {
				t.Fatal(err)
			}
			var de *workflow.DivergenceError
			if !errors.As(res.Err, &de) || de.TaskID != "only" || de.Field != tc.field || !strings.HasPrefix(de.Recorded, tc.recorded) || de.SourceRunID != src.RunID {
				t.Fatalf("replay err = %v (%+v), want a %s divergence at task only", res.Err, de, tc.field)
			}
			if res.ExitCode != workflow.ExitFailed || res.State != "failed" {
				t.Fatalf("replay ended %s exit %d", res.State, res.ExitCode)
			}
			if n := len(srv.Stats().Requests); n != before {
				t.Fatalf("the server saw %d requests during the replay", n-before)
			}
		})
	}
}

// TestReplay_ToolsListChanged: a source whose first call brought
// notifications/tools/list_changed, so that the next call re-listed the
// tools before it was sent, replays with the same re-list (the second
// session.catalog, its frames referenced) and the same inspect document.
func TestReplay_ToolsListChanged(t *testing.T) {
	tools := searchTools(0, nil)
	tools[0].Handler = func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		if err := c.Notify("notifications/tools/list_changed", nil); err != nil {
			return nil, err
		}
		return &mcptest.Result{Content: mcptest.Text("found"), StructuredContent: map[string]any{"id": "doc-1"}}, nil
	}
	srv := mcptest.Start(t, mcptest.Options{}, tools...)
	db := openDB(t)
	src, err := (&workflow.Runner{DB: db, Getenv: func(string) string { return "Bearer s3cret-token" }}).Run(context.Background(),
		mustParse(t, twoTasks(srv.URL, "idempotent")), map[string]any{"query": "mcp"}, workflow.RunOptions{})
	if err != nil || src.Err != nil {
		t.Fatalf("source: %v %v", err, src.Err)
	}
	srcLog := describeRun(t, db, src.RunID)
	if n := len(only(srcLog, "session.catalog")); n != 2 || srv.Stats().Calls["get"] != 1 {
		t.Fatalf("source re-listed %d times:\n%s", n-1, strings.Join(srcLog, "\n"))
	}
	before := len(srv.Stats().Requests)
	rep := replaytest.Replay(t, db, src.RunID)
	if rep.Err != nil || !reflect.DeepEqual(rep.Outputs, src.Outputs) {
		t.Fatalf("replay: %v %v", rep.Err, rep.Outputs)
	}
	if n := len(only(describeRun(t, db, rep.RunID), "session.catalog")); n != 2 {
		t.Fatalf("replay recorded %d catalogs", n)
	}
	want, _ := replaytest.NormalInspect(t, db, src.RunID)
	if got, _ := replaytest.NormalInspect(t, db, rep.RunID); got != want {
		t.Fatalf("inspect of replay differs from the source's:\n--- replay\n%s\n--- source\n%s", got, want)
	}
	rep2 := replaytest.Replay(t, db, rep.RunID) // a replay of the replay re-lists from the references
	if got, _ := replaytest.NormalInspect(t, db, rep2.RunID); got != want {
		t.Fatalf("inspect of the replay of the replay differs from the source's:\n%s", got)
	}
	if n := len(srv.Stats().Requests); n != before {
		t.Fatalf("the server saw %d requests during the replay", n-before)
	}
}

// TestReplay_ConcurrentTaskCalls: a source whose task calls polled their
// tasks at the same time on one session (interleaved in the log) replays
// each call from its own task's steps, deterministically.
func TestReplay_ConcurrentTaskCalls(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 3, PollInterval: 10}}, researchTool(nil))
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: parallel-tasks}
spec:
  concurrency: 3
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    act: {kind: mcp.call, idempotency: at_most_once}
  tasks:
`, srv.URL)
	for _, id := range []string{"a", "b", "c"} {
		fmt.Fprintf(&b, "    - id: %s\n      uses: action:act\n      needs: []\n      with: {server: local, tool: research, arguments: {topic: %s}}\n", id, id)
	}
	db := openDB(t)
	src := runTask(t, db, b.String(), nil)
	if src.Err != nil || srv.TaskStats().Created != 3 {
		t.Fatalf("source: %v, tasks %+v", src.Err, srv.TaskStats())
	}
	before := len(srv.Stats().Requests)
	rep1, rep2 := replaytest.Replay(t, db, src.RunID), replaytest.Replay(t, db, src.RunID)
	if rep1.State != src.State || rep2.State != src.State {
		t.Fatalf("replays ended %s and %s, source %s (%v %v)", rep1.State, rep2.State, src.State, rep1.Err, rep2.Err)
	}
	doc1, d1 := replaytest.NormalInspect(t, db, rep1.RunID)
	doc2, _ := replaytest.NormalInspect(t, db, rep2.RunID)
	if doc1 != doc2 {
		t.Fatalf("two replays differ:\n%s\n---\n%s", doc1, doc2)
	}
	srcDoc := replaytest.InspectDoc(t, db, src.RunID)
	for i, c := range d1.ProtocolCalls {
		var want *projector.CallView
		for j := range srcDoc.ProtocolCalls {
			if srcDoc.ProtocolCalls[j].EffectID == *c.SourceEffectID {
				want = &srcDoc.ProtocolCalls[j]
			}
		}
		if want == nil || c.Task == nil || want.Task == nil || c.Task.TaskID != want.Task.TaskID || c.Task.Polls != want.Task.Polls {
			t.Fatalf("replay call %d: task %+v, source's %+v", i, c.Task, want)
		}
	}
	if n := len(srv.Stats().Requests); n != before {
		t.Fatalf("the server saw %d requests during the replays", n-before)
	}
}

// TestReplay_URLElicitation: a call the server answered with -32042 (a
// person must visit a URL) replays uncertain with the same message (the
// hosts named once, from the recorded error's data) and inspect document.
func TestReplay_URLElicitation(t *testing.T) {
	tool := mcptest.ToolDef{Name: "pay", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return nil, &mcptest.RPCError{Code: -32042, Message: "authorize first",
			Data: json.RawMessage(`{"elicitations":[{"mode":"url","elicitationId":"e1","url":"https://Pay.Example.com/authorize?state=x","message":"go"}]}`)}
	}}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	db := openDB(t)
	src := runTask(t, db, taskWorkflow(srv.URL, "pay", "at_most_once", ""), nil)
	if src.ExitCode != workflow.ExitUncertain {
		t.Fatalf("source exit %d: %v", src.ExitCode, src.Err)
	}
	rep := replaytest.Replay(t, db, src.RunID)
	if rep.ExitCode != src.ExitCode || rep.Err == nil || rep.Err.Error() != src.Err.Error() || strings.Count(rep.Err.Error(), "pay.example.com") != 1 {
		t.Fatalf("replay exit %d: %v\nsource exit %d: %v", rep.ExitCode, rep.Err, src.ExitCode, src.Err)
	}
	want, _ := replaytest.NormalInspect(t, db, src.RunID)
	if got, _ := replaytest.NormalInspect(t, db, rep.RunID); got != want {
		t.Fatalf("inspect of replay differs from the source's:\n--- replay\n%s\n--- source\n%s", got, want)
	}
}

// hasMove reports whether want ("move from->to") is a move some fact of
// the described log carries.
func hasMove(log []string, want string) bool {
	m, ok := strings.CutPrefix(want, "move ")
	return ok && slices.ContainsFunc(log, func(l string) bool { return strings.HasSuffix(l, " "+m) })
}
