package workflow_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

var allClasses = []string{"pure", "idempotent", "keyed", "at_most_once", "unknown"}

// rerunnable are the classes whose retry may follow a failure after which
// the tool may have run.
var rerunnable = map[string]bool{"pure": true, "idempotent": true, "keyed": true}

// retryOutcome is what a run with a retry policy did.
type retryOutcome struct {
	db       *events.DB
	res      *workflow.Result
	attempts int // call.prepared events
	retries  int // task.retry events
}

// runRetry runs src with a fake clock; onWait, when set, runs at the
// first retry wait (before the next attempt).
func runRetry(t *testing.T, src string, onWait func()) retryOutcome {
	t.Helper()
	db := openDB(t)
	clock := &fakeClock{now: time.Now()}
	var once sync.Once
	wait := func(ctx context.Context, d time.Duration) error {
		if onWait != nil {
			once.Do(onWait)
		}
		return clock.Wait(ctx, d)
	}
	res, err := (&workflow.Runner{DB: db, Now: clock.Now, Wait: wait}).Run(context.Background(), mustParse(t, src), map[string]any{"n": "seven"}, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return retryOutcome{db: db, res: res, attempts: len(typesOf(t, db, res.RunID, vocab.TypeCallPrepared)),
		retries: len(typesOf(t, db, res.RunID, vocab.TypeTaskRetry))}
}

// lastTaskFinished is the last task.finished of the run.
func lastTaskFinished(t *testing.T, db *events.DB, runID string) vocab.TaskFinished {
	t.Helper()
	evs := typesOf(t, db, runID, vocab.TypeTaskFinished)
	if len(evs) == 0 {
		t.Fatal("no task.finished")
	}
	var p vocab.TaskFinished
	if err := evs[len(evs)-1].Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestRetry_WhatAFailureProves is the table of docs/WORKFLOWS.md ("What a
// retry follows"), one row per failure kind, each for every class, with
// the server's own counts: a failure that proves nothing was sent is
// retried for every class; one after which the tool may have run only for
// pure, idempotent and keyed (at_most_once and unknown end failed, or
// uncertain when the result is unusable); a deterministic local failure
// never, and is labelled as what it is.
func TestRetry_WhatAFailureProves(t *testing.T) {
	const policy = "{maxAttempts: 3, initialIntervalSeconds: 1}"
	for _, class := range allClasses {
		t.Run("not sent: connection refused/"+class, func(t *testing.T) {
			// The server's port is closed at the first attempt and
			// served from the retry's wait on.
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			srv := mcptest.Start(t, mcptest.Options{}, flakyTool("act", 0, false))
			served := func() {
				l, err := net.Listen("tcp", addr)
				if err != nil {
					t.Errorf("listen on %s again: %v", addr, err)
					return
				}
				hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
				go func() { _ = hs.Serve(l) }()
				t.Cleanup(func() { _ = hs.Close() })
			}
			o := runRetry(t, retryWorkflow("http://"+addr+"/mcp", class, policy, 1, "act"), served)
			if o.res.State != workflow.StateSucceeded || o.retries != 1 {
				t.Fatalf("run %s (%v), %d retries; want succeeded after one retry", o.res.State, o.res.Err, o.retries)
			}
			if st := srv.Stats(); st.Executed["act"] != 1 {
				t.Fatalf("the tool ran %d times, want 1", st.Executed["act"])
			}
		})
		t.Run("not sent: 401 before dispatch/"+class, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, flakyTool("act", 0, false))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "act", Status: http.StatusUnauthorized, Nth: 1, Times: 2})
			o := runRetry(t, retryWorkflow(srv.URL, class, policy, 1, "act"), nil)
			if o.res.State != workflow.StateSucceeded || o.attempts != 2 || o.retries != 1 {
				t.Fatalf("run %s (%v), %d attempts, %d retries; want succeeded on attempt 2", o.res.State, o.res.Err, o.attempts, o.retries)
			}
			if st := srv.Stats(); st.Executed["act"] != 1 {
				t.Fatalf("the tool ran %d times, want 1", st.Executed["act"])
			}
		})
		for _, rpc := range []bool{false, true} {
			name := "may have run: isError/"
			if rpc {
				name = "may have run: JSON-RPC error/"
			}
			t.Run(name+class, func(t *testing.T) {
				srv := mcptest.Start(t, mcptest.Options{}, flakyTool("act", 1, rpc))
				o := runRetry(t, retryWorkflow(srv.URL, class, policy, 1, "act"), nil)
				executed := srv.Stats().Executed["act"]
				if rerunnable[class] {
					if o.res.State != workflow.StateSucceeded || o.attempts != 2 || executed != 2 {
						t.Fatalf("run %s (%v), %d attempts, ran %d times; want succeeded on attempt 2", o.res.State, o.res.Err, o.attempts, executed)
					}
					return
				}
				if o.res.State != workflow.StateFailed || o.res.ExitCode != workflow.ExitFailed || o.attempts != 1 || o.retries != 0 || executed != 1 {
					t.Fatalf("run %s exit %d (%v), %d attempts, %d retries, ran %d times; want failed (4) after the one attempt",
						o.res.State, o.res.ExitCode, o.res.Err, o.attempts, o.retries, executed)
				}
			})
		}
		t.Run("may have run: output schema violated/"+class, func(t *testing.T) {
			tool := flakyTool("act", 0, false)
			tool.OutputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer","minimum":2}},"required":["n"]}`)
			srv := mcptest.Start(t, mcptest.Options{}, tool) // {n: 1} breaks it, {n: 2} does not
			o := runRetry(t, retryWorkflow(srv.URL, class, policy, 1, "act"), nil)
			executed := srv.Stats().Executed["act"]
			if rerunnable[class] {
				if o.res.State != workflow.StateSucceeded || o.attempts != 2 || executed != 2 {
					t.Fatalf("run %s (%v), %d attempts, ran %d times; want succeeded on attempt 2", o.res.State, o.res.Err, o.attempts, executed)
				}
				return
			}
			if o.res.State != workflow.StateUncertain || o.res.ExitCode != workflow.ExitUncertain || o.attempts != 1 || o.retries != 0 || executed != 1 {
				t.Fatalf("run %s exit %d (%v), %d attempts, %d retries, ran %d times; want uncertain (3) after the one attempt",
					o.res.State, o.res.ExitCode, o.res.Err, o.attempts, o.retries, executed)
			}
		})
		t.Run("may have run: task result is a JSON-RPC error/"+class, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 10}}, researchTool(func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
				mu.Lock()
				defer mu.Unlock()
				if n++; n == 1 {
					return nil, &mcptest.RPCError{Code: -32001, Message: "backend down"}
				}
				return &mcptest.Result{Content: mcptest.Text("42"), StructuredContent: map[string]any{"n": 42}}, nil
			}))
			src := strings.Replace(taskWorkflow(srv.URL, "research", class, "retry: "+policy), "  outputs:\n", "  outputs:\n", 1)
			o := runRetry(t, src, nil)
			st := srv.Stats()
			if rerunnable[class] {
				if o.res.State != workflow.StateSucceeded || o.attempts != 2 || st.Executed["research"] != 2 {
					t.Fatalf("run %s (%v), %d attempts, ran %d times; want succeeded on attempt 2", o.res.State, o.res.Err, o.attempts, st.Executed["research"])
				}
				return
			}
			if o.res.State != workflow.StateFailed || o.res.ExitCode != workflow.ExitFailed || o.attempts != 1 || o.retries != 0 || st.Executed["research"] != 1 || st.Calls["research"] != 1 {
				t.Fatalf("run %s exit %d (%v), %d attempts, %d retries, %d tools/call, ran %d times; want failed (4), one call",
					o.res.State, o.res.ExitCode, o.res.Err, o.attempts, o.retries, st.Calls["research"], st.Executed["research"])
			}
		})
		t.Run("may have run: output contract/"+class, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, flakyTool("act", 0, false))
			// The tool answers {n: call number}; the task's contract wants n ≥ 2.
			src := strings.Replace(retryWorkflow(srv.URL, class, policy, 1, "act"), "with: {server: local, tool: act}\n",
				"with: {server: local, tool: act}\n      outputSchema: {type: object, required: [n], properties: {n: {type: integer, minimum: 2}}}\n", 1)
			o := runRetry(t, src, nil)
			executed := srv.Stats().Executed["act"]
			if rerunnable[class] {
				if o.res.State != workflow.StateSucceeded || o.attempts != 2 || executed != 2 {
					t.Fatalf("run %s (%v), %d attempts, ran %d times; want succeeded on attempt 2", o.res.State, o.res.Err, o.attempts, executed)
				}
				return
			}
			if o.res.State != workflow.StateFailed || o.res.ExitCode != workflow.ExitFailed || o.attempts != 1 || o.retries != 0 || executed != 1 {
				t.Fatalf("run %s exit %d (%v), %d attempts, %d retries, ran %d times; want failed (4) after the one attempt",
					o.res.State, o.res.ExitCode, o.res.Err, o.attempts, o.retries, executed)
			}
		})
		t.Run("local: input schema violated by a template/"+class, func(t *testing.T) {
			tool := flakyTool("act", 0, false)
			tool.InputSchema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`)
			srv := mcptest.Start(t, mcptest.Options{}, tool)
			src := strings.Replace(retryWorkflow(srv.URL, class, policy, 1, "act"), "with: {server: local, tool: act}",
				`with: {server: local, tool: act, arguments: {n: "${{ inputs.n }}"}}`, 1)
			src = strings.Replace(src, "spec:\n", "spec:\n  inputs:\n    n: {type: string}\n", 1)
			o := runRetry(t, src, nil)
			fin := lastTaskFinished(t, o.db, o.res.RunID)
			if o.res.State != workflow.StateFailed || o.res.ExitCode != workflow.ExitFailed || o.attempts != 1 || o.retries != 0 || srv.Stats().Calls["act"] != 0 {
				t.Fatalf("run %s exit %d (%v), %d attempts, %d retries, %d calls; want failed (4), one attempt, nothing sent",
					o.res.State, o.res.ExitCode, o.res.Err, o.attempts, o.retries, srv.Stats().Calls["act"])
			}
			if fin.ErrorKind != "invalid_arguments" || strings.Contains(fin.Error, "transport") || !strings.Contains(fin.Error, "inputSchema") {
				t.Fatalf("task.finished = kind %q, error %q; want invalid_arguments, worded as an inputSchema violation, not a transport error", fin.ErrorKind, fin.Error)
			}
		})
		t.Run("local: template error/"+class, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, flakyTool("first", 0, false), flakyTool("act", 0, false))
			src := retryWorkflow(srv.URL, class, policy, 1, "first", "act")
			src = strings.Replace(src, "      needs: []\n      with: {server: local, tool: act}",
				"      needs: [first]\n      with: {server: local, tool: act, arguments: {v: \"${{ tasks.first.output.missing.deeper }}\"}}", 1)
			o := runRetry(t, src, nil)
			if o.res.State != workflow.StateFailed || o.res.ExitCode != workflow.ExitFailed || o.retries != 0 || srv.Stats().Calls["act"] != 0 {
				t.Fatalf("run %s exit %d (%v), %d retries, %d calls of act; want failed (4), no retry, nothing sent",
					o.res.State, o.res.ExitCode, o.res.Err, o.retries, srv.Stats().Calls["act"])
			}
		})
		t.Run("local: secret refused by policy/"+class, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, flakyTool("act", 0, false))
			t.Setenv("RETRY_TOKEN", "x") // too short to be redacted: refused before any byte is sent
			src := strings.Replace(retryWorkflow(srv.URL, class, policy, 1, "act"), "timeoutSeconds: 30}",
				"timeoutSeconds: 30, headers: {authorization: {env: RETRY_TOKEN}}}", 1)
			src = strings.Replace(src, "    networkAllowlist: [127.0.0.1]\n", "    networkAllowlist: [127.0.0.1]\n    environmentAllowlist: [RETRY_TOKEN]\n", 1)
			o := runRetry(t, src, nil)
			if o.res.ExitCode != workflow.ExitInvalid || !strings.Contains(o.res.Err.Error(), "too short") || o.retries != 0 || srv.Stats().Initialize != 0 {
				t.Fatalf("run %s exit %d (%v), %d retries, %d initialize; want refused (exit 2), no retry, nothing sent",
					o.res.State, o.res.ExitCode, o.res.Err, o.retries, srv.Stats().Initialize)
			}
		})
	}
}
