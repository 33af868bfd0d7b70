package worker_test

import (
	"bytes"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
	"github.com/agentctl/agentctl/workflow/spec"
	"github.com/agentctl/agentctl/workflow/worker"
)

// submitN queues n runs of wf.
func submitN(t *testing.T, db *events.DB, wf *spec.Workflow, n int) {
	t.Helper()
	for range n {
		if _, err := (&workflow.Runner{DB: db}).Submit(context.Background(), wf, map[string]any{}, workflow.RunOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// drain runs a draining worker over db and requires every run to succeed.
func drain(t *testing.T, w *worker.Worker, n int) []worker.Result {
	t.Helper()
	w.Drain = true
	if w.NewRunner == nil {
		w.NewRunner = func() *workflow.Runner { return &workflow.Runner{} }
	}
	out, err := w.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != n {
		t.Fatalf("worker took %d runs, want %d", len(out), n)
	}
	for _, r := range out {
		if r.State != workflow.StateSucceeded || r.Exit != 0 {
			t.Fatalf("run %+v", r)
		}
	}
	return out
}

// sessionsOf is what a run's log says of its sessions: session.opened
// events in order.
func sessionsOf(t *testing.T, db *events.DB, runID string) []vocab.SessionOpened {
	t.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Verify(evs); err != nil {
		t.Fatalf("run %s: %v", runID, err)
	}
	var out []vocab.SessionOpened
	for _, e := range evs {
		if e.Type == vocab.TypeSessionOpened {
			p, err := vocab.Decode[vocab.SessionOpened](e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// replays checks that runID stands alone: its chain and projection verify
// (inspect --verify), its audit export verifies, and it replays from its
// own log (the replay dialer answers from the log, no server) to success.
func replays(t *testing.T, db *events.DB, runID string) {
	t.Helper()
	ctx := context.Background()
	if _, err := db.VerifyRunChain(ctx, runID); err != nil {
		t.Fatalf("chain of %s: %v", runID, err)
	}
	if mm, err := projector.VerifyProjection(ctx, db, runID); err != nil || len(mm) > 0 {
		t.Fatalf("inspect --verify %s: %v %v", runID, mm, err)
	}
	var audit bytes.Buffer
	if _, err := db.Export(ctx, &audit, runID); err != nil {
		t.Fatalf("audit export %s: %v", runID, err)
	}
	if _, err := events.VerifyExport(&audit, events.VerifyOptions{}); err != nil {
		t.Fatalf("audit verify %s: %v", runID, err)
	}
	rp, err := replay.Prepare(ctx, db, runID)
	if err != nil {
		t.Fatalf("replay %s: %v", runID, err)
	}
	res, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(ctx, rp.Workflow, rp.Inputs, workflow.RunOptions{Mode: "replay", SourceRunID: runID})
	if err != nil || res.Err != nil || res.State != workflow.StateSucceeded {
		t.Fatalf("replay of %s: %v / %v", runID, err, res.Err)
	}
	if mm, err := projector.VerifyProjection(ctx, db, res.RunID); err != nil || len(mm) > 0 {
		t.Fatalf("inspect --verify of the replay of %s: %v %v", runID, mm, err)
	}
}

// TestWorker_SessionReuse: a worker draining N one-call runs opens one
// session for all of them: the server sees 1 initialize and 1 tools/list
// and N calls. The first run records its session in full; every other
// records session.opened generation 1 borrowedFrom {that run, 1} with the
// same session id digest, and a copy of its catalog. Each run verifies
// (chain, projection) and replays from its own log, also once the run
// that opened the session is pruned (SQLite: PostgreSQL keeps its log).
// With NoSessionReuse the server sees N of each, as before.
func TestWorker_SessionReuse(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		const n = 6
		for _, conc := range []int{1, 3} {
			srv := mcptest.Start(t, mcptest.Options{}, actTool())
			db := b.Open(t, events.Options{})
			submitN(t, db, mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`)), n)
			before := db.CommitStats()
			out := drain(t, &worker.Worker{DB: db, Concurrency: conc}, n)
			// One run at a time, a borrowing run commits 3 times (run.started;
			// the session, its catalog and the call's intent; the outcome
			// with task.finished and run.finished), not 6 as with a
			// session of its own; the opener at most 6.
			if commits := db.CommitStats().Commits - before.Commits; conc == 1 && commits > 3*(n-1)+6 {
				t.Fatalf("%d commits for %d runs, want at most %d", commits, n, 3*(n-1)+6)
			}
			st := srv.Stats()
			if st.Initialize != 1 || st.List != 1 || st.Calls["act"] != n {
				t.Fatalf("concurrency %d: server saw %d initialize, %d tools/list, %d calls; want 1, 1, %d", conc, st.Initialize, st.List, st.Calls["act"], n)
			}
			var opener string
			var digest string
			for _, r := range out {
				ss := sessionsOf(t, db, r.RunID)
				if len(ss) != 1 || ss[0].Generation != 1 {
					t.Fatalf("run %s sessions %+v, want one, generation 1", r.RunID, ss)
				}
				if ss[0].BorrowedFrom == nil {
					if opener != "" {
						t.Fatalf("runs %s and %s both opened a session", opener, r.RunID)
					}
					opener = r.RunID
				}
				if digest != "" && ss[0].SessionIDDigest != digest {
					t.Fatalf("run %s used session %s, want %s", r.RunID, ss[0].SessionIDDigest, digest)
				}
				digest = ss[0].SessionIDDigest
			}
			if opener == "" || digest == "" {
				t.Fatalf("no run opened the session (%q, %q)", opener, digest)
			}
			for _, r := range out {
				ss := sessionsOf(t, db, r.RunID)
				if r.RunID != opener && (ss[0].BorrowedFrom.RunID != opener || ss[0].BorrowedFrom.Generation != 1) {
					t.Fatalf("run %s borrowedFrom %+v, want {%s 1}", r.RunID, ss[0].BorrowedFrom, opener)
				}
				if r.RunID == opener {
					continue
				}
				// No handshake, no tools/list: the session and its catalog, then the call.
				want := []string{"run.created", "run.started", "task.started only", "session.opened", "session.catalog", "call.prepared",
					"mcp.request out tools/call prepared->dispatched", "mcp.response in", "call.result dispatched->succeeded",
					"task.finished only succeeded", "run.finished succeeded"}
				if got := describeRun(t, db, r.RunID); !slices.Equal(got, want) {
					t.Fatalf("borrowing run %s:\n got %q\nwant %q", r.RunID, got, want)
				}
			}
			if b.Name == "sqlite" {
				plan := &projector.PrunePlan{Prune: []projector.PruneRun{{RunSummary: projector.RunSummary{RunID: opener}}}}
				if err := projector.Prune(context.Background(), db, plan); err != nil {
					t.Fatal(err)
				}
			}
			for _, r := range out {
				if r.RunID != opener || b.Name != "sqlite" {
					replays(t, db, r.RunID)
				}
			}
			if st := srv.Stats(); st.Initialize != 1 || st.Calls["act"] != n {
				t.Fatalf("the replays reached the server: %d initialize, %d calls", st.Initialize, st.Calls["act"])
			}
		}

		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		db := b.Open(t, events.Options{})
		submitN(t, db, mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`)), n)
		out := drain(t, &worker.Worker{DB: db, Concurrency: 2, NoSessionReuse: true}, n)
		if st := srv.Stats(); st.Initialize != n || st.List != n {
			t.Fatalf("NoSessionReuse: server saw %d initialize, %d tools/list; want %d of each", st.Initialize, st.List, n)
		}
		for _, r := range out {
			if ss := sessionsOf(t, db, r.RunID); len(ss) != 1 || ss[0].BorrowedFrom != nil {
				t.Fatalf("NoSessionReuse: run %s sessions %+v", r.RunID, ss)
			}
		}
	})
}

// TestWorker_SessionReuse_Expired: the server forgets its sessions after
// the first run (a restart). The second run's call on the pooled session
// is answered 404: it records session.expired, opens generation 2 (a new
// initialize, the pool's new session) and succeeds; the third run
// borrows that one. The server sees 2 initialize and 3 executions (the
// call answered 404 was not executed); each run replays from its own log.
func TestWorker_SessionReuse_Expired(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		db := b.Open(t, events.Options{})
		// idempotent: a 404 on tools/call is ambiguous (the call may have
		// run), so only a call that may be sent again survives it.
		submitN(t, db, mustParse(t, oneCall(srv.URL, "act", "idempotent", `{n: 1}`)), 3)
		var done []string
		w := &worker.Worker{DB: db, Concurrency: 1, Finished: func(r worker.Result) {
			if done = append(done, r.RunID); len(done) == 1 {
				srv.ExpireSessions()
			}
		}}
		out := drain(t, w, 3)
		st := srv.Stats()
		if st.Initialize != 2 || st.Executed["act"] != 3 {
			t.Fatalf("server saw %d initialize, %d executions; want 2, 3", st.Initialize, st.Executed["act"])
		}
		first, second, third := sessionsOf(t, db, out[0].RunID), sessionsOf(t, db, out[1].RunID), sessionsOf(t, db, out[2].RunID)
		if len(first) != 1 || first[0].BorrowedFrom != nil {
			t.Fatalf("first run's sessions %+v", first)
		}
		if len(second) != 2 || second[0].BorrowedFrom == nil || second[0].BorrowedFrom.RunID != out[0].RunID ||
			second[1].Generation != 2 || second[1].BorrowedFrom != nil || second[1].SessionIDDigest == first[0].SessionIDDigest {
			t.Fatalf("second run's sessions %+v", second)
		}
		if !contains(describeRun(t, db, out[1].RunID), "session.expired") {
			t.Fatalf("second run: no session.expired: %q", describeRun(t, db, out[1].RunID))
		}
		if len(third) != 1 || third[0].BorrowedFrom == nil || *third[0].BorrowedFrom != (vocab.SessionOrigin{RunID: out[1].RunID, Generation: 2}) ||
			third[0].SessionIDDigest != second[1].SessionIDDigest {
			t.Fatalf("third run's sessions %+v", third)
		}
		for _, r := range out {
			replays(t, db, r.RunID)
		}
	})
}

// TestWorker_SessionReuse_Credentials: runs whose remote resolves to other
// credentials never share a session: two workflows on one server, with
// Authorization from TOKEN_A and TOKEN_B, make 2 sessions for 4 runs, and
// every request of a session carries the credential it was opened with. A
// third workflow reading TOKEN_C, whose value is TOKEN_A's, shares A's.
func TestWorker_SessionReuse_Credentials(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		db := b.Open(t, events.Options{})
		tokens := map[string]string{"TOKEN_A": "Bearer token-aaaaaaaa", "TOKEN_B": "Bearer token-bbbbbbbb", "TOKEN_C": "Bearer token-aaaaaaaa"}
		for _, env := range []string{"TOKEN_A", "TOKEN_B", "TOKEN_A", "TOKEN_B", "TOKEN_C"} {
			src := testkit.Workflow{URL: srv.URL, ServerKeys: []string{"headers: {authorization: {env: " + env + "}}"},
				PolicyKeys: []string{"environmentAllowlist: [TOKEN_A, TOKEN_B, TOKEN_C]"},
				Tasks:      []testkit.Task{{ID: "only", Action: "act", Idempotency: "at_most_once", Tool: "act", Arguments: "{n: 1}"}}}.YAML()
			submitN(t, db, mustParse(t, src), 1)
		}
		drain(t, &worker.Worker{DB: db, Concurrency: 2, NewRunner: func() *workflow.Runner {
			return &workflow.Runner{Getenv: func(k string) string { return tokens[k] }}
		}}, 5)
		st := srv.Stats()
		if st.Initialize != 2 || st.Calls["act"] != 5 {
			t.Fatalf("server saw %d initialize, %d calls; want 2 sessions (one per credential), 5 calls", st.Initialize, st.Calls["act"])
		}
		opened := map[string]string{} // session id -> Authorization at initialize
		for _, rq := range st.Requests {
			if rq.RPCMethod == "initialize" {
				continue
			}
			if rq.Session != "" && opened[rq.Session] == "" {
				opened[rq.Session] = rq.Header.Get("Authorization")
			}
			if rq.Session != "" && rq.Header.Get("Authorization") != opened[rq.Session] {
				t.Fatalf("session %s: request %s with another credential", rq.Session, rq.RPCMethod)
			}
		}
		if len(opened) != 2 {
			t.Fatalf("%d sessions used, want 2", len(opened))
		}
	})
}

func contains(lines []string, s string) bool {
	return slices.Contains(lines, s)
}

// TestWorker_SessionReuse_CatalogTTL2026: at 2026-07-28 the runs share
// the server/discover and, while its ttlMs lasts, the tools/list result:
// with ttlMs one hour, 4 runs make 1 discover and 1 tools/list; with no
// ttlMs (immediately stale), each run lists the tools again, its
// tools/list frames in its own log after session.opened, and replays.
func TestWorker_SessionReuse_CatalogTTL2026(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		hour := int64(3600_000)
		for _, ttl := range []*int64{&hour, nil} {
			srv := mcptest.Start(t, mcptest.Options{ProtocolVersion: mcptest.Protocol20260728, ListTTLMs: ttl}, actTool())
			db := b.Open(t, events.Options{})
			src := testkit.Workflow{URL: srv.URL, ServerKeys: []string{"protocolVersion: 2026-07-28"},
				Tasks: []testkit.Task{{ID: "only", Action: "act", Idempotency: "at_most_once", Tool: "act", Arguments: "{n: 1}"}}}.YAML()
			submitN(t, db, mustParse(t, src), 4)
			out := drain(t, &worker.Worker{DB: db, Concurrency: 1}, 4)
			st := srv.Stats()
			discover := 0
			for _, rq := range st.Requests {
				if rq.RPCMethod == "server/discover" {
					discover++
				}
			}
			wantList := 1
			if ttl == nil {
				wantList = 4
			}
			if discover != 1 || st.List != wantList || st.Calls["act"] != 4 {
				t.Fatalf("ttl %v: server saw %d server/discover, %d tools/list, %d calls; want 1, %d, 4", ttl, discover, st.List, st.Calls["act"], wantList)
			}
			for _, r := range out {
				ss := sessionsOf(t, db, r.RunID)
				if len(ss) != 1 || ss[0].ProtocolVersion != mcptest.Protocol20260728 {
					t.Fatalf("run %s sessions %+v", r.RunID, ss)
				}
				if lists := contains(describeRun(t, db, r.RunID), "mcp.request out tools/list"); ss[0].BorrowedFrom != nil && lists != (ttl == nil) {
					t.Fatalf("ttl %v: borrowing run %s lists tools: %t", ttl, r.RunID, lists)
				}
				replays(t, db, r.RunID)
			}
		}
	})
}

// TestWorker_SessionReuse_ToolsListChanged: the first run's call brings
// notifications/tools/list_changed on the shared session. The pooled
// catalog is then stale for every run: the next run does not borrow that
// session but opens (and lists) a new one, which the third run borrows.
// The server sees 2 initialize and 2 tools/list for 3 runs.
func TestWorker_SessionReuse_ToolsListChanged(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		tool := actTool()
		first := true
		tool.Handler = func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			if first { // one run at a time (Concurrency 1)
				first = false
				if err := c.Notify("notifications/tools/list_changed", nil); err != nil {
					return nil, err
				}
			}
			return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
		}
		srv := mcptest.Start(t, mcptest.Options{}, tool)
		db := b.Open(t, events.Options{})
		submitN(t, db, mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`)), 3)
		out := drain(t, &worker.Worker{DB: db, Concurrency: 1}, 3)
		if st := srv.Stats(); st.Initialize != 2 || st.List != 2 || st.Calls["act"] != 3 {
			t.Fatalf("server saw %d initialize, %d tools/list, %d calls; want 2, 2, 3", st.Initialize, st.List, st.Calls["act"])
		}
		second, third := sessionsOf(t, db, out[1].RunID), sessionsOf(t, db, out[2].RunID)
		if len(second) != 1 || second[0].BorrowedFrom != nil {
			t.Fatalf("second run's sessions %+v, want one of its own", second)
		}
		if len(third) != 1 || third[0].BorrowedFrom == nil || third[0].BorrowedFrom.RunID != out[1].RunID {
			t.Fatalf("third run's sessions %+v, want the second run's", third)
		}
		for _, r := range out {
			replays(t, db, r.RunID)
		}
	})
}

// TestWorker_SessionReuse_IdleTooLong: a pooled session no run used for
// longer than MaxIdle is closed (DELETE) instead of lent: the next run
// opens a new one. Within MaxIdle it is lent.
func TestWorker_SessionReuse_IdleTooLong(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	db := testkit.Backends(t)[0].Open(t, events.Options{})
	wf := mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`))
	now := time.Unix(1_700_000_000, 0)
	pool := &workflow.SessionPool{Now: func() time.Time { return now }, MaxIdle: time.Minute}
	defer pool.Close()
	for i, step := range []struct {
		idle             time.Duration
		initialize, dels int
	}{{0, 1, 0}, {time.Minute, 1, 0}, {time.Minute + time.Second, 2, 1}} {
		now = now.Add(step.idle)
		submitN(t, db, wf, 1)
		drain(t, &worker.Worker{DB: db, Concurrency: 1, Sessions: pool}, 1)
		if st := srv.Stats(); st.Initialize != step.initialize || st.Deletes != step.dels {
			t.Fatalf("run %d, idle %s: server saw %d initialize, %d DELETE; want %d, %d", i+1, step.idle, st.Initialize, st.Deletes, step.initialize, step.dels)
		}
	}
}

// TestWorker_SessionReuse_Refused400: a server that answers 400 (not 404)
// for a session it forgot, as the TypeScript reference server does,
// refuses the second run's call: that run fails by the rules (nothing
// ran), and the session leaves the pool, so the third run opens a new one
// and succeeds.
func TestWorker_SessionReuse_Refused400(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		db := b.Open(t, events.Options{})
		submitN(t, db, mustParse(t, oneCall(srv.URL, "act", "at_most_once", `{n: 1}`)), 3)
		var states []string
		w := &worker.Worker{DB: db, Concurrency: 1, NewRunner: func() *workflow.Runner { return &workflow.Runner{} },
			Drain: true, Finished: func(r worker.Result) {
				if states = append(states, r.State); len(states) == 1 {
					srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Nth: 1, Status: 400})
				}
			}}
		out, err := w.Run(context.Background())
		if err != nil || len(out) != 3 {
			t.Fatalf("worker: %d runs, %v", len(out), err)
		}
		if !slices.Equal(states, []string{workflow.StateSucceeded, workflow.StateFailed, workflow.StateSucceeded}) {
			t.Fatalf("run states %v", states)
		}
		if st := srv.Stats(); st.Initialize != 2 || st.Executed["act"] != 2 {
			t.Fatalf("server saw %d initialize, %d executions; want 2, 2", st.Initialize, st.Executed["act"])
		}
		if third := sessionsOf(t, db, out[2].RunID); len(third) != 1 || third[0].BorrowedFrom != nil {
			t.Fatalf("third run's sessions %+v, want one of its own", third)
		}
	})
}
