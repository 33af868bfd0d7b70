package main

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
)

var allClasses = []string{"pure", "idempotent", "keyed", "at_most_once", "unknown"}

func isRedispatchable(idem string) bool {
	return idem == "pure" || idem == "idempotent" || idem == "keyed"
}

// actTool answers {"done": true}; its outputSchema requires done.
func actTool() mcptest.ToolDef {
	return mcptest.ToolDef{Name: "act",
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"done":{"type":"boolean"}},"required":["done"]}`),
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
		}}
}

// actWorkflow writes a one-task workflow calling act on url with class idem.
func actWorkflow(t *testing.T, url, idem string) string {
	t.Helper()
	return testkit.Workflow{Name: "act-once", URL: url,
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: "act", Arguments: "{n: 1}"}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
}

// crashRun runs agentctl in a subprocess that SIGKILLs itself right after
// the event crashAfter, and returns the run id found in the log.
func crashRun(t *testing.T, db, wf, crashAfter string) string {
	t.Helper()
	cmd := subprocess(t, "run", wf, "--db", db, "--output", "json")
	cmd.Env = append(cmd.Env, "AGENTCTL_TEST_CRASH_AFTER="+crashAfter)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("run with crash after %q did not die: %v\n%s", crashAfter, err, out)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("run with crash after %q ended with %v, not SIGKILL\n%s", crashAfter, err, out)
	}
	awaitDeadOwners(t, db)
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs in log: %v", ids)
	}
	return ids[0]
}

func runIDs(t *testing.T, path string) []string {
	t.Helper()
	db := openLog(t, path)
	ids, err := projector.RunIDs(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// openLog opens the database at path once per test (a PostgreSQL pool per
// call would exhaust the server's connections in the tests' loops).
func openLog(t *testing.T, path string) *events.DB {
	t.Helper()
	key := t.Name() + "\x00" + path
	if db, ok := openLogs.Load(key); ok {
		return db.(*events.DB)
	}
	db := testkit.OpenDB(t, path, events.Options{})
	openLogs.Store(key, db)
	t.Cleanup(func() { openLogs.Delete(key) })
	return db
}

var openLogs sync.Map

// describe renders the run's events with projector.Describe.
func describe(t *testing.T, path, runID string) []string {
	t.Helper()
	evs, err := openLog(t, path).Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(evs))
	var d projector.Describer
	for i, e := range evs {
		out[i] = d.Describe(e)
	}
	return out
}

// assertRebuildEqual folds runID's projections again from the log and
// checks they equal the incremental ones, with the check `inspect --verify`
// runs (each table in its full key's order, in a transaction rolled back).
func assertRebuildEqual(t *testing.T, path, runID string) {
	t.Helper()
	mismatches, err := projector.VerifyProjection(context.Background(), openLog(t, path), runID)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mismatches {
		t.Errorf("run %s: rebuilt rows differ from incremental ones: %s", runID, m)
	}
}

// resumeJSON resumes runID in-process and returns the exit code and the
// RunResult data (or the error envelope).
func resumeJSON(t *testing.T, db, runID string) (int, map[string]any, string) {
	t.Helper()
	out, stderr, code := cli(t, "resume", runID, "--db", db, "--output", "json")
	var env struct {
		Data map[string]any `json:"data"`
	}
	if out != "" {
		if err := json.Unmarshal([]byte(out), &env); err != nil {
			t.Fatalf("resume stdout: %v\n%s", err, out)
		}
	}
	return code, env.Data, stderr
}

// TestCLI_CrashResume kills agentctl right after each event of a call and
// resumes; per class, the server sees what the rules allow and no more.
func TestCLI_CrashResume(t *testing.T) {
	type point struct {
		at string
		// calls the server saw in total after the resume, and the exit code,
		// for redispatchable classes and for the others.
		calls, code, callsNR, codeNR int
		inits, initsNR               int
		fault                        bool // a 404 on the first tools/call (a server restart)
		final                        bool // the point is in the run's last commit (run.finished)
	}
	points := []point{
		// call.prepared, the dispatch transition and the request frame are one
		// commit, made before a byte is sent: the intent is durable, so the
		// call counts as possibly sent and the rules decide.
		{at: "call.prepared", calls: 1, code: 0, callsNR: 0, codeNR: 3, inits: 2, initsNR: 1},
		{at: "call.transition prepared->dispatched", calls: 1, code: 0, callsNR: 0, codeNR: 3, inits: 2, initsNR: 1},
		// The request frame is on disk (its bytes may or may not have left).
		{at: "mcp.request out tools/call", calls: 1, code: 0, callsNR: 0, codeNR: 3, inits: 2, initsNR: 1},
		// The response frame is committed with call.result, the succeeded
		// transition, task.finished and, the task being the last, run.finished:
		// once it is on disk, so is the outcome, and the run is over (resume
		// refuses a finished run with exit 2 and sends nothing).
		{at: "mcp.response in#3", calls: 1, code: 2, callsNR: 1, codeNR: 2, inits: 1, initsNR: 1, final: true},
		{at: "call.result", calls: 1, code: 2, callsNR: 1, codeNR: 2, inits: 1, initsNR: 1, final: true},
		{at: "call.transition dispatched->succeeded", calls: 1, code: 2, callsNR: 1, codeNR: 2, inits: 1, initsNR: 1, final: true},
		{at: "task.finished", calls: 1, code: 2, callsNR: 1, codeNR: 2, inits: 1, initsNR: 1, final: true},
		// After a server restart: the reconnect goes on after the crash.
		{at: "call.transition dispatched->reconnecting", calls: 2, code: 0, callsNR: 1, codeNR: 3, inits: 2, initsNR: 1, fault: true},
		// The resend was committed but the process died: the budget is spent
		// (read from the log), so the call is uncertain, not sent a third time.
		{at: "call.transition reconnecting->redispatched", calls: 1, code: 3, callsNR: 1, codeNR: 3, inits: 2, initsNR: 1, fault: true},
	}
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, p := range points {
			for _, idem := range allClasses {
				if p.fault && !isRedispatchable(idem) {
					continue // these classes never reach reconnecting
				}
				t.Run(strings.NewReplacer(" ", "_", "#", "@").Replace(p.at)+"/"+idem, func(t *testing.T) {
					t.Parallel()
					srv := mcptest.Start(t, mcptest.Options{}, actTool())
					if p.fault {
						srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
					}
					db := b.DSN(t)
					runID := crashRun(t, db, actWorkflow(t, srv.URL, idem), p.at)
					code, data, stderr := resumeJSON(t, db, runID)
					wantCalls, wantCode, wantInits := p.calls, p.code, p.inits
					if !isRedispatchable(idem) {
						wantCalls, wantCode, wantInits = p.callsNR, p.codeNR, p.initsNR
					}
					st := srv.Stats()
					if code != wantCode || st.Calls["act"] != wantCalls || st.Initialize != wantInits {
						t.Fatalf("resume exit %d, server saw %d calls, %d initializations; want exit %d, %d, %d\n%s\n%s",
							code, st.Calls["act"], st.Initialize, wantCode, wantCalls, wantInits, stderr, strings.Join(describe(t, db, runID), "\n"))
					}
					switch wantCode {
					case 0:
						if r, _ := json.Marshal(data["outputs"]); string(r) != `{"result":{"done":true}}` {
							t.Fatalf("outputs = %s", r)
						}
					case 3:
						if !strings.Contains(stderr, "agentctl effects reconcile ") || !strings.Contains(stderr, "agentctl resume "+runID) {
							t.Fatalf("uncertain exit does not say how to reconcile:\n%s", stderr)
						}
					}
					got := describe(t, db, runID)
					if p.final {
						if last := got[len(got)-1]; last != "run.finished succeeded" || !strings.Contains(stderr, "run finished succeeded") {
							t.Fatalf("last event %q; resume said:\n%s", last, stderr)
						}
					} else if n := strings.Count(strings.Join(got, "\n"), "run.resumed"); n != 1 {
						t.Fatalf("%d run.resumed events:\n%s", n, strings.Join(got, "\n"))
					}
					if _, err := openLog(t, db).VerifyRun(context.Background(), runID); err != nil {
						t.Fatalf("chain: %v", err)
					}
					assertRebuildEqual(t, db, runID)
				})
			}
		}
	})
}
