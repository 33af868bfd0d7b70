package workflow_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// retryRun runs src with a fake clock starting now and returns the result,
// the waits the run asked for and the call.prepared payloads in log order.
func retryRun(t *testing.T, src string) (*events.DB, *workflow.Result, []time.Duration, []vocab.CallPrepared) {
	t.Helper()
	db := openDB(t)
	wf, err := spec.Parse("retry.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Now()}
	res, err := (&workflow.Runner{DB: db, Now: clock.Now, Wait: clock.Wait}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var prepared []vocab.CallPrepared
	for _, e := range typesOf(t, db, res.RunID, vocab.TypeCallPrepared) {
		var p vocab.CallPrepared
		if err := e.Decode(&p); err != nil {
			t.Fatal(err)
		}
		prepared = append(prepared, p)
	}
	clock.mu.Lock()
	defer clock.mu.Unlock()
	return db, res, clock.waits, prepared
}

// TestRetry_EveryDefinitiveFailureEveryClass: an HTTP 4xx (refused before
// dispatch) is retried for every class, a task's output contract violation
// like isError for the classes that may run a tool again, and a retry is a
// new attempt with a new effect identity (and, for keyed, a new
// idempotency key). TestRetry_WhatAFailureProves has the whole table.
func TestRetry_EveryDefinitiveFailureEveryClass(t *testing.T) {
	const policy = "{maxAttempts: 3, initialIntervalSeconds: 1}"
	t.Run("http 4xx", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{}, flakyTool("status", 0, false))
		srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "status", Status: http.StatusBadRequest, Nth: 1})
		db, res, waits, prepared := retryRun(t, retryWorkflow(srv.URL, "at_most_once", policy, 1, "status"))
		if res.State != workflow.StateSucceeded || len(prepared) != 2 || len(waits) != 1 {
			t.Fatalf("run %s (%v), %d attempts, waits %v; want succeeded on attempt 2 after one wait", res.State, res.Err, len(prepared), waits)
		}
		if st := srv.Stats(); st.Calls["status"] != 2 || st.Executed["status"] != 1 {
			t.Fatalf("%d calls, the tool ran %d times; want 2 and 1 (the 400 answered before it)", st.Calls["status"], st.Executed["status"])
		}
		// A replay reaches the same decision from the recorded 400.
		rep := replayOf(t, db, res.RunID)
		if rep.State != res.State || len(typesOf(t, db, rep.RunID, vocab.TypeTaskRetry)) != 1 {
			t.Fatalf("replay ended %s (%v), want %s with the source's one retry", rep.State, rep.Err, res.State)
		}
	})
	t.Run("output contract", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{}, flakyTool("count", 0, false))
		// The tool answers {n: call number}; the contract wants n ≥ 3.
		src := strings.Replace(retryWorkflow(srv.URL, "idempotent", policy, 1, "count"),
			"with: {server: local, tool: count}\n",
			"with: {server: local, tool: count}\n      outputSchema: {type: object, required: [n], properties: {n: {type: integer, minimum: 3}}}\n", 1)
		_, res, waits, prepared := retryRun(t, src)
		if res.State != workflow.StateSucceeded || len(prepared) != 3 || len(waits) != 2 || srv.Stats().Calls["count"] != 3 {
			t.Fatalf("run %s (%v), %d attempts, waits %v, %d calls; want succeeded on attempt 3", res.State, res.Err, len(prepared), waits, srv.Stats().Calls["count"])
		}
	})
	for _, class := range []string{"pure", "idempotent", "keyed"} {
		t.Run("isError "+class, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, flakyTool("flaky", 2, false))
			_, res, _, prepared := retryRun(t, retryWorkflow(srv.URL, class, policy, 1, "flaky"))
			if res.State != workflow.StateSucceeded || len(prepared) != 3 {
				t.Fatalf("run %s (%v), %d attempts; want succeeded on attempt 3", res.State, res.Err, len(prepared))
			}
			effects, keys := map[string]bool{}, map[string]bool{}
			for i, p := range prepared {
				if p.Attempt != i+1 {
					t.Fatalf("call %d is attempt %d", i, p.Attempt)
				}
				effects[p.EffectID] = true
				keys[p.IdempotencyKey] = true
			}
			if len(effects) != 3 {
				t.Fatalf("%d effect ids for 3 attempts", len(effects))
			}
			if class == "keyed" && (len(keys) != 3 || keys[""]) {
				t.Fatalf("idempotency keys %v, want 3 distinct", keys)
			}
		})
	}
}

// TestRetry_TaskTimeoutBoundsAllAttempts: a task's timeoutSeconds covers
// every attempt: no retry is scheduled whose wait would end after it (the
// task fails with the attempts made so far), and an attempt still in
// flight when it ends leaves its call uncertain (exit 3), never retried.
func TestRetry_TaskTimeoutBoundsAllAttempts(t *testing.T) {
	t.Run("no retry past the timeout", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{}, flakyTool("never", 99, false))
		// Waits would be 4 s then 8 s: the second ends 12 s after the
		// start, past the task's 10 s.
		src := strings.Replace(retryWorkflow(srv.URL, "idempotent", "{maxAttempts: 5, initialIntervalSeconds: 4, backoffFactor: 2}", 1, "never"),
			"      needs: []\n", "      needs: []\n      timeoutSeconds: 10\n", 1)
		_, res, waits, prepared := retryRun(t, src)
		if res.State != workflow.StateFailed || res.ExitCode != workflow.ExitFailed || len(prepared) != 2 || len(waits) != 1 || waits[0] != 4*time.Second {
			t.Fatalf("run %s exit %d (%v), %d attempts, waits %v; want failed after 2 attempts and one 4 s wait", res.State, res.ExitCode, res.Err, len(prepared), waits)
		}
		if srv.Stats().Calls["never"] != 2 {
			t.Fatalf("%d calls, want 2", srv.Stats().Calls["never"])
		}
	})
	t.Run("an attempt in flight", func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		hang := mcptest.ToolDef{Name: "hang", Handler: func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
			select {
			case <-ctx.Done():
			case <-release:
			}
			return nil, ctx.Err()
		}}
		srv := mcptest.Start(t, mcptest.Options{}, hang)
		t.Cleanup(func() { once.Do(func() { close(release) }) })
		src := strings.Replace(retryWorkflow(srv.URL, "idempotent", "{maxAttempts: 5}", 1, "hang"),
			"      needs: []\n", "      needs: []\n      timeoutSeconds: 1\n", 1)
		db := openDB(t)
		res, err := (&workflow.Runner{DB: db}).Run(context.Background(), mustParse(t, src), nil, workflow.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.State != workflow.StateUncertain || res.ExitCode != workflow.ExitUncertain {
			t.Fatalf("run %s exit %d (%v), want uncertain, 3", res.State, res.ExitCode, res.Err)
		}
		if n := len(typesOf(t, db, res.RunID, vocab.TypeTaskRetry)); n != 0 || srv.Stats().Calls["hang"] != 1 {
			t.Fatalf("%d retries scheduled, %d calls; want none, 1", n, srv.Stats().Calls["hang"])
		}
	})
}

// TestContinueOnError_OutputIsNull: a task that fails with continueOnError
// gives null to the templates of later tasks and of the run's outputs; the
// run succeeds.
func TestContinueOnError_OutputIsNull(t *testing.T) {
	var mu sync.Mutex
	var got json.RawMessage
	echo := mcptest.ToolDef{Name: "echo", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		mu.Lock()
		got = append(json.RawMessage(nil), c.Arguments...)
		mu.Unlock()
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"ok": true}}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, flakyTool("broken", 99, false), echo)
	src := retryWorkflow(srv.URL, "idempotent", "", 1, "broken", "echo")
	src = strings.Replace(src, "with: {server: local, tool: broken}\n", "with: {server: local, tool: broken}\n      continueOnError: true\n", 1)
	src = strings.Replace(src, "      needs: []\n      with: {server: local, tool: echo}\n",
		"      needs: [broken]\n      with: {server: local, tool: echo, arguments: {seen: \"${{ tasks.broken.output }}\"}}\n", 1)
	src += "  outputs:\n    broken: \"${{ tasks.broken.output }}\"\n"
	db := openDB(t)
	res, err := (&workflow.Runner{DB: db}).Run(context.Background(), mustParse(t, src), nil, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.State != workflow.StateSucceeded || res.ExitCode != workflow.ExitOK {
		t.Fatalf("run %s exit %d (%v), want succeeded", res.State, res.ExitCode, res.Err)
	}
	mu.Lock()
	defer mu.Unlock()
	if string(got) != `{"seen":null}` {
		t.Fatalf("echo received %s, want {\"seen\":null}", got)
	}
	if v, ok := res.Outputs["broken"]; !ok || v != nil {
		t.Fatalf("outputs %v, want broken: null", res.Outputs)
	}
}
