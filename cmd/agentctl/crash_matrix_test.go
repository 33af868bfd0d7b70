package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// The crash matrix (issue #9 part 1): for every idempotency class and every
// event a call appends — session frames, the call's intent, each kind of
// stream frame, the response, the result and every call.transition the
// state machine can reach during a run — a subprocess is SIGKILLed right
// after that event is committed, then the run is resumed. The crash points
// are not written by hand: each scenario runs once without a crash and
// every event of that reference log, from the scenario's first point on,
// becomes a point ("Describe line#N").

// chattyTool is act with a stream of evidence before its result: two
// progress notifications, a log message and a server request.
func chattyTool() mcptest.ToolDef {
	d := actTool()
	d.Handler = func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		for _, step := range []func() error{
			func() error { return c.Progress(1, 2, "half way") },
			func() error {
				return c.Notify("notifications/message", map[string]any{"level": "info", "data": "working"})
			},
			func() error { return c.Request("roots/list", json.RawMessage(`"srv-1"`), map[string]any{}) },
			func() error { return c.Progress(2, 2, "done") },
		} {
			if err := step(); err != nil {
				return nil, err
			}
		}
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	return d
}

// failingTool is act answering an isError result.
func failingTool() mcptest.ToolDef {
	d := actTool()
	d.Handler = func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		return nil, errors.New("no such order")
	}
	return d
}

// crashScenario is one way a call can go.
type crashScenario struct {
	name string
	// redispatchOnly: only pure, idempotent and keyed reach the paths tried.
	redispatchOnly bool
	// start starts a fresh server for the scenario and returns it and the
	// URL the workflow calls.
	start func(t *testing.T) (*mcptest.Server, string)
	// from: points start after the first event with this Describe line
	// (with an optional #N); "" = from the first event.
	from string
	// want: a Describe line each class's reference run must contain (the
	// transition the scenario is about), per class kind.
	want, wantNR string
	// protocol pins the remote's protocolVersion; "" = the default (crash_2026_test.go).
	protocol string
}

// workflow is actWorkflow for sc's protocol.
func (sc crashScenario) workflow(t *testing.T, url, idem string) string {
	t.Helper()
	if sc.protocol == "" {
		return actWorkflow(t, url, idem)
	}
	return testkit.Workflow{Name: "act-once", URL: url, ServerKeys: []string{fmt.Sprintf("protocolVersion: %q", sc.protocol)},
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: "act", Arguments: "{n: 1}"}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
}

func plainServer(tool mcptest.ToolDef, faults ...mcptest.Fault) func(t *testing.T) (*mcptest.Server, string) {
	return func(t *testing.T) (*mcptest.Server, string) {
		srv := mcptest.Start(t, mcptest.Options{}, tool)
		for _, f := range faults {
			srv.Inject(f)
		}
		return srv, srv.URL
	}
}

// schemaChangingServer answers the first tools/call with 404 (a restart)
// and changes act's inputSchema at that moment, so the next session lists
// another digest.
func schemaChangingServer(t *testing.T) (*mcptest.Server, string) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
	var once sync.Once
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			once.Do(func() {
				changed := actTool()
				changed.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"},"m":{"type":"string"}}}`)
				srv.AddTool(changed)
			})
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		srv.ServeHTTP(w, r)
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	front.Listener = l
	front.Start()
	t.Cleanup(front.Close)
	return srv, front.URL + "/mcp"
}

var expired = mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1}

func crashScenarios() []crashScenario {
	strict := actTool()
	strict.InputSchema = json.RawMessage(`{"type":"object","required":["m"]}`)
	return []crashScenario{
		{name: "ok", start: plainServer(chattyTool()),
			want: "call.transition dispatched->succeeded", wantNR: "call.transition dispatched->succeeded"},
		{name: "bad-arguments", start: plainServer(strict), from: "session.catalog",
			want: "call.transition prepared->failed", wantNR: "call.transition prepared->failed"},
		{name: "tool-error", start: plainServer(failingTool()), from: "mcp.request out tools/call",
			want: "call.transition dispatched->failed", wantNR: "call.transition dispatched->failed"},
		{name: "possibly-executed", start: plainServer(actTool(), mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusServiceUnavailable, Nth: 1}),
			from: "mcp.request out tools/call", want: "call.transition dispatched->uncertain", wantNR: "call.transition dispatched->uncertain"},
		{name: "expired", start: plainServer(actTool(), expired), from: "mcp.request out tools/call",
			want: "call.transition reconnecting->redispatched", wantNR: "call.transition dispatched->uncertain"},
		{name: "schema-changed", redispatchOnly: true, start: schemaChangingServer, from: "session.opened#2",
			want: "call.transition reconnecting->failed"},
		{name: "reconnect-failed", redispatchOnly: true,
			start: plainServer(actTool(), expired, mcptest.Fault{RPCMethod: "initialize", Status: http.StatusInternalServerError, Nth: 2}),
			from:  "call.transition dispatched->reconnecting", want: "call.transition reconnecting->uncertain"},
		{name: "redispatch-failed", redispatchOnly: true, start: plainServer(failingTool(), expired),
			from: "call.transition reconnecting->redispatched", want: "call.transition redispatched->failed"},
		{name: "redispatch-uncertain", redispatchOnly: true,
			start: plainServer(actTool(), mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1, Times: 2}),
			from:  "call.transition reconnecting->redispatched", want: "call.transition redispatched->uncertain"},
	}
}

// crashRef is a scenario's reference run for one class.
type crashRef struct {
	code   int
	points [][]string // crash points ("Describe line#N"), grouped by commit, in log order
	lines  []string   // the whole reference log
}

// everyEvent makes the matrix kill after every event, not once per commit.
var everyEvent = os.Getenv("AGENTCTL_CRASH_MATRIX") == "every"

// crashReference runs sc for idem without a crash and lists its points,
// grouped by the commit that made them durable: events of one commit share
// created_at. A kill after any event of a commit leaves the same database
// and the same server state (the hook fires after the commit, and nothing
// is sent between the events of one commit), so by default one kill per
// commit stands for all its events; AGENTCTL_CRASH_MATRIX=every kills
// after each.
func crashReference(t *testing.T, sc crashScenario, idem string, b testkit.Backend) crashRef {
	t.Helper()
	_, url := sc.start(t)
	db := b.DSN(t)
	_, stderr, code := cli(t, "run", sc.workflow(t, url, idem), "--db", db, "--output", "json")
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("reference run: %s", stderr)
	}
	evs := logOf(t, db, ids[0])
	ref := crashRef{code: code, lines: describeAll(evs)}
	want := sc.want
	if !isRedispatchable(idem) {
		want = sc.wantNR
	}
	if !logNames(ref.lines, want) {
		t.Fatalf("%s/%s: reference run lacks %q:\n%s", sc.name, idem, want, strings.Join(ref.lines, "\n"))
	}
	started := sc.from == ""
	for i, l := range ref.lines {
		p := pointName(ref.lines, i)
		if started && l != "run.created" {
			if n := len(ref.points); n > 0 && !everyEvent && evs[i].CreatedAt == evs[i-1].CreatedAt {
				ref.points[n-1] = append(ref.points[n-1], p)
			} else {
				ref.points = append(ref.points, []string{p})
			}
		}
		if !started && sc.from != "" && (p == sc.from || lineNames(l, sc.from)) {
			started = true
		}
	}
	if len(ref.points) == 0 {
		t.Fatalf("%s/%s: no point after %q", sc.name, idem, sc.from)
	}
	return ref
}

// killedAt runs agentctl args in a subprocess that SIGKILLs itself right
// after the event crashAfter is committed, and returns its output.
func killedAt(t *testing.T, crashAfter string, args ...string) string {
	t.Helper()
	cmd := subprocess(t, args...)
	cmd.Env = append(cmd.Env, "AGENTCTL_TEST_CRASH_AFTER="+crashAfter)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("%v with crash after %q did not die: %v\n%s", args, crashAfter, err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("%v with crash after %q ended with %v, not SIGKILL\n%s", args, crashAfter, err, out)
	}
	awaitDeadOwners(t, dbArg(args))
	return string(out)
}

func logOf(t *testing.T, db, runID string) []events.Event {
	t.Helper()
	evs, err := openLog(t, db).Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// assertSound checks what every crash must leave: seq dense from 1, the
// chain verifies, the events committed before the crash are a prefix of
// the log (nothing lost, nothing rewritten), and rebuild == incremental.
func assertSound(t *testing.T, db, runID string, before []events.Event) []events.Event {
	t.Helper()
	after := logOf(t, db, runID)
	for i, e := range after {
		if e.Seq != int64(i+1) {
			t.Fatalf("seq not dense: event %d has seq %d", i, e.Seq)
		}
	}
	if len(after) < len(before) {
		t.Fatalf("%d events before the resume, %d after", len(before), len(after))
	}
	for i, e := range before {
		if after[i].Hash != e.Hash || after[i].Type != e.Type {
			t.Fatalf("event %d changed: %s %s -> %s %s", e.Seq, e.Type, e.Hash, after[i].Type, after[i].Hash)
		}
	}
	if n, err := openLog(t, db).VerifyRun(context.Background(), runID); err != nil || n != int64(len(after)) {
		t.Fatalf("chain: %d events verified of %d: %v", n, len(after), err)
	}
	assertRebuildEqual(t, db, runID)
	return after
}

func describeAll(evs []events.Event) []string {
	out := make([]string, len(evs))
	var d projector.Describer
	for i, e := range evs {
		out[i] = d.Describe(e)
	}
	return out
}

// TestCLI_CrashMatrix kills agentctl after every event of a call, for every
// class, and resumes: pure/idempotent/keyed tools execute at most twice in
// total, at_most_once/unknown at most once; no event is lost or rewritten.
// On SQLite and PostgreSQL.
func TestCLI_CrashMatrix(t *testing.T) {
	t.Parallel()
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		t.Parallel()
		var mu sync.Mutex
		kills, points := 0, 0
		t.Cleanup(func() { t.Logf("crash matrix: %d event points × classes, %d kills", points, kills) })
		for _, sc := range crashScenarios() {
			for _, idem := range allClasses {
				if sc.redispatchOnly && !isRedispatchable(idem) {
					continue
				}
				t.Run(sc.name+"/"+idem, func(t *testing.T) {
					t.Parallel()
					ref := crashReference(t, sc, idem, b)
					for _, group := range ref.points {
						name := strings.NewReplacer(" ", "_", "#", "@").Replace(group[0])
						if len(group) > 1 {
							name += fmt.Sprintf("+%d", len(group)-1)
						}
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							crashAndResume(t, sc, idem, group[0], ref, b)
							mu.Lock()
							kills, points = kills+1, points+len(group)
							mu.Unlock()
						})
					}
				})
			}
		}
	})
}

func crashAndResume(t *testing.T, sc crashScenario, idem, point string, ref crashRef, b testkit.Backend) {
	srv, url := sc.start(t)
	db := b.DSN(t)
	killedAt(t, point, "run", sc.workflow(t, url, idem), "--db", db, "--output", "json")
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs in log: %v", ids)
	}
	runID := ids[0]
	before := logOf(t, db, runID)
	if got := describeAll(before); !slices.Equal(got, ref.lines[:min(len(got), len(ref.lines))]) {
		t.Fatalf("the killed run is not a prefix of the reference run:\n%s\n---\n%s", strings.Join(got, "\n"), strings.Join(ref.lines, "\n"))
	}
	code, data, stderr := resumeJSON(t, db, runID)
	after := assertSound(t, db, runID, before)
	lines := describeAll(after)
	limit := 1
	if isRedispatchable(idem) {
		limit = 2
	}
	if n := srv.Stats().Executed["act"]; n > limit {
		t.Fatalf("%s tool executed %d times in total, at most %d allowed\n%s", idem, n, limit, strings.Join(lines, "\n"))
	}
	if before[len(before)-1].Type == vocab.TypeRunFinished {
		if code != 2 || len(after) != len(before) {
			t.Fatalf("resume of a finished run: exit %d, %d events appended; want exit 2 and none\n%s", code, len(after)-len(before), stderr)
		}
		return
	}
	// An outcome on disk is never changed; one not yet on disk is decided
	// again by the rules (a crash may leave it uncertain; a failed
	// reconnect that was not recorded is tried again).
	if outcomeLogged(before) && code != ref.code {
		t.Fatalf("resume exit %d, reference run exit %d, with the outcome on disk\n%s\n%s", code, ref.code, stderr, strings.Join(lines, "\n"))
	}
	if code != 0 && code != 3 && code != 4 {
		t.Fatalf("resume exit %d\n%s\n%s", code, stderr, strings.Join(lines, "\n"))
	}
	// A 5xx answer on disk means possibly executed: never sent again.
	if i := slices.Index(describeAll(before), "mcp.http_error in tools/call"); i >= 0 && strings.Contains(before[i].Payload, `"httpStatus":503`) &&
		strings.Count(strings.Join(lines, "\n"), "mcp.request out tools/call") != 1 {
		t.Fatalf("resent after a 503 on disk\n%s", strings.Join(lines, "\n"))
	}
	if n := strings.Count(strings.Join(lines, "\n"), "run.resumed"); n != 1 || !strings.HasPrefix(lines[len(lines)-1], "run.finished") {
		t.Fatalf("%d run.resumed events, last event %q\n%s", n, lines[len(lines)-1], strings.Join(lines, "\n"))
	}
	if code == 0 {
		if r, _ := json.Marshal(data["outputs"]); string(r) != `{"result":{"done":true}}` {
			t.Fatalf("outputs = %s", r)
		}
	}
	// The resumed run replays from its log alone, to the same exit code.
	if rcode, _, _ := replayCLI(t, db, runID); rcode != code {
		t.Fatalf("replay of the resumed run: exit %d, resume's %d", rcode, code)
	}
}

// outcomeLogged reports whether a call ended (a terminal transition) in evs.
func outcomeLogged(evs []events.Event) bool {
	for _, e := range evs {
		var tr vocab.CallTransition
		if e.Type == vocab.TypeCallTransition && e.Decode(&tr) == nil {
			switch tr.To {
			case "succeeded", "failed", "uncertain", "cancelled":
				return true
			}
		}
	}
	return false
}

var demoURL = regexp.MustCompile(`demo server (http://127\.0\.0\.1:\d+/mcp)`)

// TestCLI_CrashDemo kills `agentctl demo` mid-run (after the first task's
// result, mid progress stream, after the second task), brings the demo
// server back on the same address and resumes the run it left. On SQLite
// and PostgreSQL.
func TestCLI_CrashDemo(t *testing.T) {
	t.Parallel()
	// Hold demo's usual port so that each killed demo gets an ephemeral
	// one, which no other demo takes before the test listens on it again.
	if l, err := net.Listen("tcp", "127.0.0.1:8765"); err == nil {
		t.Cleanup(func() { _ = l.Close() })
	}
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, point := range []string{"call.result", "mcp.notification in notifications/progress#2", "task.finished#2"} {
			t.Run(strings.NewReplacer(" ", "_", "#", "@").Replace(point), func(t *testing.T) {
				t.Parallel()
				crashDemoAt(t, b.DSN(t), point)
			})
		}
	})
}

func crashDemoAt(t *testing.T, db, point string) {
	out := killedAt(t, point, "demo", "--db", db)
	m := demoURL.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no demo server line:\n%s", out)
	}
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	before := logOf(t, db, ids[0])
	// The demo server died with the process: start one on its address.
	srv := demoserver.New(demoserver.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, stop, err := srv.Serve(ctx, strings.TrimSuffix(strings.TrimPrefix(m[1], "http://"), "/mcp")); err != nil {
		t.Fatalf("restart the demo server on %s: %v", m[1], err)
	} else {
		defer func() {
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			_ = stop(sctx)
		}()
	}
	code, data, stderr := resumeJSON(t, db, ids[0])
	if code != 0 {
		t.Fatalf("resume exit %d: %s", code, stderr)
	}
	if r, _ := json.Marshal(data["outputs"]); !strings.Contains(string(r), `"title":"Document doc-`) || !strings.Contains(string(r), `"words":`) {
		t.Fatalf("outputs = %s", r)
	}
	after := assertSound(t, db, ids[0], before)
	// Every demo tool is idempotent: at most two requests per task.
	sent := map[string]int{}
	for _, e := range after {
		var f vocab.Frame
		if strings.HasPrefix(projector.Describe(e), "mcp.request out tools/call") && e.Decode(&f) == nil {
			sent[f.TaskID]++
		}
	}
	for task, n := range sent {
		if n > 2 {
			t.Fatalf("task %s sent tools/call %d times", task, n)
		}
	}
	for _, tool := range []string{"search", "get", "analyze"} {
		if n := srv.Calls(tool); n > 1 {
			t.Fatalf("the restarted server ran %s %d times", tool, n)
		}
	}
}

// TestCLI_CrashReplay kills `agentctl replay` mid-run: the source run is
// unchanged and verifies, the killed replay's chain verifies (it cannot be
// resumed), and a second replay succeeds with the source's outputs; no
// replay reaches the server. On SQLite and PostgreSQL.
func TestCLI_CrashReplay(t *testing.T) {
	t.Parallel()
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		// A replay records references to the source's frames (replay.frames),
		// not the frames: #1 and #2 are the session's, #3 the call's.
		for _, point := range []string{"run.created", "replay.frames session#1", "call.prepared", "replay.frames call", "call.result", "task.finished"} {
			t.Run(strings.NewReplacer(" ", "_", "#", "@").Replace(point), func(t *testing.T) {
				t.Parallel()
				crashReplayAt(t, b.DSN(t), point)
			})
		}
	})
}

func crashReplayAt(t *testing.T, db, point string) {
	srv := mcptest.Start(t, mcptest.Options{}, chattyTool())
	if _, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "at_most_once"), "--db", db); code != 0 {
		t.Fatalf("source run: %s", stderr)
	}
	sourceID := runIDs(t, db)[0]
	source := logOf(t, db, sourceID)
	killedAt(t, point, "replay", sourceID, "--db", db)
	var crashed string
	for _, id := range runIDs(t, db) {
		if id != sourceID {
			crashed = id
		}
	}
	if crashed == "" || !strings.HasPrefix(crashed, "replay-") {
		t.Fatalf("no replay run left: %v", runIDs(t, db))
	}
	assertSound(t, db, sourceID, source)
	if got := logOf(t, db, sourceID); len(got) != len(source) {
		t.Fatalf("source run has %d events, had %d", len(got), len(source))
	}
	partial := assertSound(t, db, crashed, nil)
	if _, stderr, code := cli(t, "resume", crashed, "--db", db); code != 2 {
		t.Fatalf("resume of a killed replay: exit %d, want 2: %s", code, stderr)
	}
	assertSound(t, db, crashed, partial)
	out, stderr, code := cli(t, "replay", sourceID, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("second replay: exit %d: %s", code, stderr)
	}
	if !strings.Contains(out, `"result": {`) || !strings.Contains(out, `"done": true`) {
		t.Fatalf("second replay outputs: %s", out)
	}
	assertSound(t, db, jsonRunID(t, out), nil)
	assertSound(t, db, sourceID, source)
	if n := srv.Stats().Executed["act"]; n != 1 {
		t.Errorf("replays reached the server: act executed %d times", n)
	}
}
