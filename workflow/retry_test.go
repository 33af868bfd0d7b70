package workflow_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
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

// flakyTool fails its first fails calls with isError (or a JSON-RPC error
// when rpc is set), then answers {n: <call number>}.
func flakyTool(name string, fails int, rpc bool) mcptest.ToolDef {
	var mu sync.Mutex
	n := 0
	return mcptest.ToolDef{Name: name, Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
		mu.Lock()
		n++
		k := n
		mu.Unlock()
		if k <= fails {
			if rpc {
				return nil, &mcptest.RPCError{Code: -32000, Message: fmt.Sprintf("down (call %d)", k)}
			}
			return nil, fmt.Errorf("not yet (call %d)", k)
		}
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"n": k}}, nil
	}}
}

// retryWorkflow has one task per tool in tools, all independent, whose
// action is idem with the retry policy retry (YAML flow, "" for none).
func retryWorkflow(url, idem, retry string, concurrency int, tools ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: retries}
spec:
  concurrency: %d
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    act: {kind: mcp.call, idempotency: %s`, concurrency, url, idem)
	if retry != "" {
		fmt.Fprintf(&b, ", retry: %s", retry)
	}
	b.WriteString("}\n  tasks:\n")
	for _, tool := range tools {
		fmt.Fprintf(&b, "    - id: %s\n      uses: action:act\n      needs: []\n      with: {server: local, tool: %s}\n", tool, tool)
	}
	return b.String()
}

// fakeClock is a Runner clock that moves only when the run waits.
type fakeClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Wait(_ context.Context, d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	return nil
}

func typesOf(t *testing.T, db *events.DB, runID, typ string) []events.Event {
	t.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(evs, func(e events.Event) bool { return e.Type != typ })
}

// TestRetry_BackoffAfterDefinitiveFailures: isError and JSON-RPC errors
// are retried as new attempts with new effect identities, after the
// recorded waits of the policy; an exhausted policy fails the task.
func TestRetry_BackoffAfterDefinitiveFailures(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, flakyTool("iserror", 2, false), flakyTool("rpcerror", 2, true), flakyTool("never", 99, false))
	for _, tc := range []struct {
		tool      string
		state     string
		attempts  int
		wantWaits []time.Duration
	}{
		{"iserror", workflow.StateSucceeded, 3, []time.Duration{time.Second, 2 * time.Second}},
		{"rpcerror", workflow.StateSucceeded, 3, []time.Duration{time.Second, 2 * time.Second}},
		{"never", workflow.StateFailed, 4, []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			db := openDB(t)
			wf, err := spec.Parse("retry.yaml", []byte(retryWorkflow(srv.URL, "idempotent",
				"{maxAttempts: 4, initialIntervalSeconds: 1, backoffFactor: 2, maxIntervalSeconds: 3}", 1, tc.tool)))
			if err != nil {
				t.Fatal(err)
			}
			clock := &fakeClock{now: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
			res, err := (&workflow.Runner{DB: db, Now: clock.Now, Wait: clock.Wait}).Run(context.Background(), wf, nil, workflow.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != tc.state {
				t.Fatalf("run %s (%v), want %s", res.State, res.Err, tc.state)
			}
			if !slices.Equal(clock.waits, tc.wantWaits) {
				t.Fatalf("waits %v, want %v", clock.waits, tc.wantWaits)
			}
			scheduled := typesOf(t, db, res.RunID, vocab.TypeTaskRetry)
			if len(scheduled) != len(tc.wantWaits) {
				t.Fatalf("%d task.retry_scheduled, want %d", len(scheduled), len(tc.wantWaits))
			}
			at := clock.now.Add(-sum(tc.wantWaits))
			for i, e := range scheduled {
				var p vocab.TaskRetryScheduled
				if err := e.Decode(&p); err != nil {
					t.Fatal(err)
				}
				at = at.Add(tc.wantWaits[i])
				if p.Attempt != i+2 || p.NotBefore != at.Format(time.RFC3339Nano) {
					t.Fatalf("retry %d = %+v, want attempt %d not before %s", i, p, i+2, at.Format(time.RFC3339Nano))
				}
			}
			prepared := typesOf(t, db, res.RunID, vocab.TypeCallPrepared)
			effects := map[string]bool{}
			for _, e := range prepared {
				var p vocab.CallPrepared
				_ = e.Decode(&p)
				effects[p.EffectID] = true
			}
			if len(prepared) != tc.attempts || len(effects) != tc.attempts {
				t.Fatalf("%d calls with %d effect ids, want %d new identities", len(prepared), len(effects), tc.attempts)
			}
		})
	}
}

func sum(ds []time.Duration) time.Duration {
	var s time.Duration
	for _, d := range ds {
		s += d
	}
	return s
}

// TestRetry_NeverAfterUncertain: a call that may have run is the
// operator's decision, whatever the policy says.
func TestRetry_NeverAfterUncertain(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, flakyTool("lost", 0, false))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
	db := openDB(t)
	wf, err := spec.Parse("retry.yaml", []byte(retryWorkflow(srv.URL, "unknown", "{maxAttempts: 5}", 1, "lost")))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Now()}
	res, err := (&workflow.Runner{DB: db, Now: clock.Now, Wait: clock.Wait}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var re *workflow.Error
	if res.State != workflow.StateUncertain || !errors.As(res.Err, &re) || re.Code != workflow.ExitUncertain {
		t.Fatalf("run %s (%v), want uncertain", res.State, res.Err)
	}
	if n := len(typesOf(t, db, res.RunID, vocab.TypeTaskRetry)); n != 0 || len(clock.waits) != 0 || srv.Stats().Calls["lost"] != 1 {
		t.Fatalf("%d retries scheduled, %d waits, %d calls; want none, none, 1", n, len(clock.waits), srv.Stats().Calls["lost"])
	}
}

// TestReplay_InterleavedRunIsDeterministic: a run of concurrent tasks
// (one retried) replays without divergence, and two replays of it give
// the same outcome and the same inspect document.
func TestReplay_InterleavedRunIsDeterministic(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, flakyTool("a", 1, false), flakyTool("b", 0, false), flakyTool("c", 0, false), flakyTool("d", 0, false))
	db := openDB(t)
	wf, err := spec.Parse("retry.yaml", []byte(retryWorkflow(srv.URL, "idempotent", "{maxAttempts: 2, initialIntervalSeconds: 0.01}", 4, "a", "b", "c", "d")))
	if err != nil {
		t.Fatal(err)
	}
	src, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil || src.Err != nil {
		t.Fatalf("source run: %v %v", err, src.Err)
	}
	rep1 := replayOf(t, db, src.RunID)
	rep2 := replayOf(t, db, src.RunID)
	if rep1.State != src.State || rep2.State != src.State {
		t.Fatalf("replays ended %s and %s, source %s (%v %v)", rep1.State, rep2.State, src.State, rep1.Err, rep2.Err)
	}
	doc1, _ := normalInspect(t, db, rep1.RunID)
	doc2, _ := normalInspect(t, db, rep2.RunID)
	if doc1 != doc2 {
		t.Fatalf("two replays differ:\n%s\n---\n%s", doc1, doc2)
	}
	if n := len(typesOf(t, db, rep1.RunID, vocab.TypeTaskRetry)); n != 1 {
		t.Fatalf("replay recorded %d retries, want the source's 1", n)
	}
}
