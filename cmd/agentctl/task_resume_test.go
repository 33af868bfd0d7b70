package main

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// researchTool is a tool that must be called as an MCP task.
func researchTool() mcptest.ToolDef {
	t := actTool()
	t.Name, t.Execution = "research", json.RawMessage(`{"taskSupport":"required"}`)
	return t
}

func researchWorkflow(t *testing.T, url, idem string) string {
	t.Helper()
	return testkit.Workflow{Name: "research-once", URL: url,
		Tasks:   []testkit.Task{{ID: "only", Action: "act", Idempotency: idem, Tool: "research", Arguments: "{n: 1}"}},
		Outputs: []testkit.Output{{Name: "result", Value: "${{ tasks.only.output }}"}}}.WriteFile(t)
}

// sealDB turns payload encryption on for the database at db (before any
// run), with the key in the environment of this process and of the
// subprocesses it starts.
func sealDB(t *testing.T, db string) {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable encryption exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
}

// sessionIDs are the MCP-Session-Id values the server issued (seen on
// requests), each a bearer credential.
func sessionIDs(srv *mcptest.Server) []string {
	var ids []string
	for _, r := range srv.Stats().Requests {
		if r.Session != "" && !slices.Contains(ids, r.Session) {
			ids = append(ids, r.Session)
		}
	}
	return ids
}

// assertNoSessionID fails if any session id the server issued is in a
// byte of the SQLite database (its file and WAL) or an event payload.
func assertNoSessionID(t *testing.T, srv *mcptest.Server, db, runID string) {
	t.Helper()
	ids := sessionIDs(srv)
	if len(ids) == 0 {
		t.Fatal("the server issued no session id")
	}
	var stored []byte
	for _, f := range []string{db, db + "-wal"} {
		b, _ := os.ReadFile(f)
		stored = append(stored, b...)
	}
	for _, id := range ids {
		if bytes.Contains(stored, []byte(id)) {
			t.Errorf("session id %q is stored in the database", id)
		}
		for _, e := range logOf(t, db, runID) {
			if strings.Contains(e.Payload, id) {
				t.Errorf("session id %q in the payload of %s (seq %d)", id, e.Type, e.Seq)
			}
		}
	}
}

// TestCLI_TaskCrashResume kills agentctl while it polls a task (right after
// the commit that records the task working), then resumes: for every
// class the run asks about the same task again and the server saw exactly
// one tools/call. With encryption on the recorded session is reattached
// (no new initialize); with encryption off its id was never stored (no
// byte of the database holds it): resume asks about the task on a new
// session of its own (a server that lets any session reach its tasks).
func TestCLI_TaskCrashResume(t *testing.T) {
	for _, mode := range []string{"sealed", "clear"} {
		for _, idem := range allClasses {
			t.Run(mode+"/"+idem, func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 4, PollInterval: 10, Shared: mode == "clear"}}, researchTool())
				db := t.TempDir() + "/a.db"
				if mode == "sealed" {
					sealDB(t, db)
				}
				runID := crashRun(t, db, researchWorkflow(t, srv.URL, idem), "call.transition accepted->polling")
				code, data, stderr := resumeJSON(t, db, runID)
				if code != 0 || data["state"] != "succeeded" {
					t.Fatalf("resume exit %d, data %v\n%s", code, data, stderr)
				}
				st, ts := srv.Stats(), srv.TaskStats()
				initialize := map[string]int{"sealed": 1, "clear": 2}[mode]
				if st.Calls["research"] != 1 || st.Executed["research"] != 1 || st.Initialize != initialize || ts.Created != 1 || ts.Results != 1 {
					t.Fatalf("server saw calls %d, executed %d, initialize %d (want %d), tasks %+v", st.Calls["research"], st.Executed["research"], st.Initialize, initialize, ts)
				}
				lines := describe(t, db, runID)
				log := strings.Join(lines, "\n")
				reattached := map[string]int{"sealed": 1, "clear": 0}[mode]
				if strings.Count(log, "mcp.request out tools/call") != 1 || strings.Count(log, "session.reattached") != reattached ||
					strings.Count(log, "session.opened") != initialize || !logNames(lines, "call.transition polling->polling") {
					t.Fatalf("log:\n%s", log)
				}
				out, _, code := cli(t, "inspect", runID, "--db", db, "--output", "json")
				if code != 0 || !strings.Contains(out, `"taskId": "mcptest-task-1"`) || !strings.Contains(out, `"taskIdDigest": "sha256:`) {
					t.Fatalf("inspect exit %d:\n%s", code, out)
				}
				// The session id (a bearer credential) is in the log only
				// sealed; inspect shows only its digest.
				for _, sid := range sessionIDs(srv) {
					if strings.Contains(out, sid) {
						t.Fatalf("inspect prints the raw session id %q", sid)
					}
				}
				if mode == "clear" {
					assertNoSessionID(t, srv, db, runID)
				}
			})
		}
	}
}

// TestCLI_TaskCrashResumeSessionGone: the task is gone for the resumed
// run: with encryption on the server forgot the session while agentctl
// was down (404 on the reattached session's first tasks/get); with
// encryption off the new session cannot reach a task of the old one
// (-32602, as the reference server answers). The task is lost:
// at_most_once ends uncertain (task_lost), idempotent is sent again.
func TestCLI_TaskCrashResumeSessionGone(t *testing.T) {
	for _, mode := range []string{"sealed", "clear"} {
		for _, tc := range []struct {
			idem        string
			code, calls int
		}{{"at_most_once", 3, 1}, {"idempotent", 0, 2}} {
			t.Run(mode+"/"+tc.idem, func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 4, PollInterval: 10}}, researchTool())
				db := t.TempDir() + "/a.db"
				if mode == "sealed" {
					sealDB(t, db)
				}
				runID := crashRun(t, db, researchWorkflow(t, srv.URL, tc.idem), "call.transition accepted->polling")
				if mode == "sealed" {
					srv.Inject(mcptest.Fault{RPCMethod: "tasks/get", Nth: 1, Status: http.StatusNotFound})
				}
				code, _, stderr := resumeJSON(t, db, runID)
				if code != tc.code {
					t.Fatalf("resume exit %d, want %d\n%s", code, tc.code, stderr)
				}
				if tc.code == 3 && !strings.Contains(stderr, "task_lost") {
					t.Fatalf("stderr lacks task_lost:\n%s", stderr)
				}
				if n := srv.Stats().Executed["research"]; n != tc.calls {
					t.Fatalf("executed %d, want %d", n, tc.calls)
				}
				// The resumed run replays from its log alone, to the same end;
				// the replay, never interrupted, does not open the session resume
				// opened only to poll: a resend answers from the session it went on.
				rcode, repID, _ := replayCLI(t, db, runID)
				if rcode != code {
					t.Fatalf("replay exit %d, resume's %d", rcode, code)
				}
				if code == 0 {
					src, rep := openedSessions(t, db, runID), openedSessions(t, db, repID)
					if len(rep) == 0 || rep[len(rep)-1].SessionIDDigest != src[len(src)-1].SessionIDDigest || slices.ContainsFunc(rep, func(s vocab.SessionOpened) bool { return s.TaskPoll }) {
						t.Fatalf("replay sessions %+v; source's %+v", rep, src)
					}
				}
			})
		}
	}
}

// openedSessions are the session.opened payloads of a run, in order.
func openedSessions(t *testing.T, db, runID string) []vocab.SessionOpened {
	t.Helper()
	var out []vocab.SessionOpened
	for _, e := range logOf(t, db, runID) {
		if e.Type == vocab.TypeSessionOpened {
			var p vocab.SessionOpened
			if err := e.Decode(&p); err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// TestCLI_TaskCrashMatrix kills agentctl after every commit of a task
// call and resumes: the log stays sound; at_most_once never sends a second
// tools/call and, once the CreateTaskResult is on disk, always succeeds
// (only the window between sending the tools/call and committing the task
// may leave it uncertain); idempotent always succeeds, with at most one
// resend, itself a task. Each resumed run then replays to the same exit
// code without a request to the server.
//
// It runs with encryption on (resume reattaches the recorded session) and
// off (resume asks about the task on a new session; the server lets any
// session reach its tasks).
func TestCLI_TaskCrashMatrix(t *testing.T) {
	for _, mode := range []string{"sealed", "clear"} {
		for _, idem := range []string{"at_most_once", "idempotent"} {
			t.Run(mode+"/"+idem, func(t *testing.T) { taskCrashMatrix(t, idem, mode == "sealed") })
		}
	}
}

func taskCrashMatrix(t *testing.T, idem string, sealed bool) {
	start := func(t *testing.T) *mcptest.Server {
		return mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 2, PollInterval: 10, Shared: !sealed}}, researchTool())
	}
	newDB := func(t *testing.T, name string) string {
		db := t.TempDir() + "/" + name
		if sealed {
			sealDB(t, db)
		}
		return db
	}
	srv := start(t)
	refDB := newDB(t, "ref.db")
	if _, stderr, code := cli(t, "run", researchWorkflow(t, srv.URL, idem), "--db", refDB, "--output", "json"); code != 0 {
		t.Fatalf("reference run exit %d: %s", code, stderr)
	}
	evs := logOf(t, refDB, runIDs(t, refDB)[0])
	lines := describeAll(evs)
	var points []string // the last event of each commit after run.created
	accepted := -1      // index in points of the commit holding call.task_accepted
	for i, l := range lines {
		if lineNames(l, "call.task_accepted") {
			accepted = len(points)
		}
		if i == 0 || (i+1 < len(evs) && evs[i+1].CreatedAt == evs[i].CreatedAt) {
			continue
		}
		points = append(points, pointName(lines, i))
	}
	if accepted < 0 || len(points) < 4 {
		t.Fatalf("reference log:\n%s", strings.Join(lines, "\n"))
	}
	for i, p := range points {
		if i == len(points)-1 {
			break // run.finished: nothing left to resume
		}
		t.Run(strings.ReplaceAll(p, "#", " "), func(t *testing.T) { // no "#": the DB path is a file: URI
			srv := start(t)
			db := newDB(t, "a.db")
			runID := crashRun(t, db, researchWorkflow(t, srv.URL, idem), p)
			before := logOf(t, db, runID)
			code, _, stderr := resumeJSON(t, db, runID)
			assertSound(t, db, runID, before)
			maxCalls, ok := 1, i < accepted || code == 0
			if idem != "at_most_once" {
				maxCalls, ok = 2, code == 0
			}
			if n := srv.Stats().Calls["research"]; n > maxCalls {
				t.Fatalf("server saw %d tools/call", n)
			}
			if !ok || (code != 0 && code != 3) {
				t.Fatalf("resume after %s exit %d\n%s", p, code, stderr)
			}
			// The resumed run replays from its log alone, to the same end.
			requests := len(srv.Stats().Requests)
			if rcode, _, _ := replayCLI(t, db, runID); rcode != code {
				t.Fatalf("replay of the run resumed after %s: exit %d, resume's %d", p, rcode, code)
			}
			if n := len(srv.Stats().Requests); n != requests {
				t.Fatalf("the server saw %d requests during the replay", n-requests)
			}
		})
	}
}

// TestCLI_TaskSessionIDNeverInClear: with encryption off, a task call's
// session id (a bearer credential) is in no row or byte of the database,
// on either backend, nor in the run's jsonl output or its audit export;
// only its digest is kept.
func TestCLI_TaskSessionIDNeverInClear(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 2, PollInterval: 10}}, researchTool())
		db := b.DSN(t)
		out, stderr, code := cli(t, "run", researchWorkflow(t, srv.URL, "at_most_once"), "--db", db, "--output", "jsonl")
		if code != 0 {
			t.Fatalf("run exit %d: %s\n%s", code, stderr, out)
		}
		ids := sessionIDs(srv)
		if len(ids) == 0 || srv.TaskStats().Created != 1 {
			t.Fatalf("sessions %v, tasks %+v: the run made no task call", ids, srv.TaskStats())
		}
		var runID string
		for _, l := range strings.Split(out, "\n") {
			if i := strings.Index(l, `"runId":"`); i >= 0 && runID == "" {
				runID, _, _ = strings.Cut(l[i+len(`"runId":"`):], `"`)
			}
		}
		file := filepath.Join(t.TempDir(), "audit.jsonl")
		if _, stderr, code := cli(t, "audit", "export", runID, "-o", file, "--db", db); code != 0 {
			t.Fatalf("audit export %q: exit %d %s", runID, code, stderr)
		}
		exp, _ := os.ReadFile(file)
		if !dbHolds(t, db, "sessionIdDigest") {
			t.Fatal("the database holds no session id digest: nothing was checked")
		}
		for _, id := range ids {
			if dbHolds(t, db, id) {
				t.Errorf("session id %q is stored in the database", id)
			}
			if strings.Contains(out, id) || strings.Contains(string(exp), id) {
				t.Errorf("session id %q is in the jsonl output or the audit export", id)
			}
		}
	})
}
