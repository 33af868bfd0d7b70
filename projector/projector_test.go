package projector_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// tools offers a tool per behaviour the random workflows pick from.
func tools(big string) []mcptest.ToolDef {
	return []mcptest.ToolDef{
		{Name: "ok", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]any{"args": c.Arguments}}, nil
		}},
		{Name: "chatty", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			var a struct{ N int }
			_ = json.Unmarshal(c.Arguments, &a)
			for i := 1; i <= a.N; i++ {
				if err := c.Progress(float64(i), float64(a.N), ""); err != nil {
					return nil, err
				}
			}
			return &mcptest.Result{Content: mcptest.Text("done")}, nil
		}},
		{Name: "big", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text(big)}, nil
		}},
		{Name: "iserror", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, fmt.Errorf("tool says no")
		}},
		{Name: "rpcerror", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, &mcptest.RPCError{Code: -32000, Message: "backend down"}
		}},
	}
}

// workflowSource is a workflow named random that makes calls (in order,
// unless a call's keys say otherwise): task ti through its own action ai,
// at spec.concurrency concurrency (0: absent).
func workflowSource(url string, concurrency int, calls []testkit.Task) string {
	for i := range calls {
		calls[i].ID, calls[i].Action = fmt.Sprintf("t%d", i), fmt.Sprintf("a%d", i)
	}
	return testkit.Workflow{Name: "random", URL: url, Concurrency: concurrency, Tasks: calls}.YAML()
}

// snapshot renders every projection row of runID, in a stable order.
func snapshot(t *testing.T, db *events.DB, runID string) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		`SELECT * FROM runs WHERE run_id = ?`,
		`SELECT * FROM tasks WHERE run_id = ? ORDER BY task_id, attempt`,
		`SELECT * FROM protocol_sessions WHERE run_id = ? ORDER BY task_id, remote, generation`,
		`SELECT * FROM protocol_calls WHERE run_id = ? ORDER BY effect_id`,
		`SELECT * FROM effects WHERE run_id = ? ORDER BY effect_id`,
	} {
		rows, err := db.SQL().Queryx(q, runID)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			m := map[string]any{}
			if err := rows.MapScan(m); err != nil {
				t.Fatal(err)
			}
			delete(m, "rowid") // PostgreSQL's insertion order, not a value
			for k, v := range m {
				if bs, ok := v.([]byte); ok {
					m[k] = string(bs)
				}
			}
			line, _ := json.Marshal(m)
			b.Write(line)
			b.WriteByte('\n')
		}
		rows.Close()
	}
	return b.String()
}

func TestRebuild_EqualsIncrementalForRandomRuns(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		testRebuildEqualsIncremental(t, b.Open(t, events.Options{Durability: events.DurabilityNormal}))
	})
}

func testRebuildEqualsIncremental(t *testing.T, db *events.DB) {
	srv := mcptest.Start(t, mcptest.Options{}, tools(strings.Repeat("x", 5000))...)
	rng := rand.New(rand.NewPCG(5, 13))
	idems := []string{"pure", "idempotent", "keyed", "at_most_once", "unknown"}
	var runIDs []string
	for i := range 40 {
		n := 1 + rng.IntN(4)
		var calls []testkit.Task
		for j := range n {
			c := testkit.Task{Idempotency: idems[rng.IntN(len(idems))]}
			// The graph: independent tasks, tasks that let the run go on,
			// retries after definitive failures.
			if rng.IntN(3) == 0 {
				c.Keys = append(c.Keys, "needs: []")
			}
			if rng.IntN(4) == 0 {
				c.Keys = append(c.Keys, "continueOnError: true")
			}
			if rng.IntN(3) == 0 {
				c.Retry = "{maxAttempts: 2, initialIntervalSeconds: 0.001}"
			}
			switch rng.IntN(6) {
			case 0:
				c.Tool, c.Arguments = "chatty", fmt.Sprintf("{n: %d}", rng.IntN(5))
			case 1:
				c.Tool = "big"
			case 2:
				c.Tool = "iserror"
			case 3:
				c.Tool = "rpcerror"
			case 4:
				c.Tool = "missing"
			default:
				c.Tool, c.Arguments = "ok", fmt.Sprintf("{run: %d, task: %d}", i, j)
			}
			calls = append(calls, c)
		}
		switch rng.IntN(4) { // a fault on the next tools/call: expiry, 5xx, or none
		case 0:
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Nth: 1, Status: http.StatusNotFound})
		case 1:
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Nth: 1, Status: http.StatusServiceUnavailable})
		}
		wf, err := spec.Parse("random.yaml", []byte(workflowSource(srv.URL, 1+rng.IntN(3), calls)))
		if err != nil {
			t.Fatalf("workflow %d: %v", i, err)
		}
		res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		runIDs = append(runIDs, res.RunID)
	}
	states := map[string]int{}
	for _, id := range runIDs {
		before := snapshot(t, db, id)
		if err := projector.Rebuild(context.Background(), db, id); err != nil {
			t.Fatalf("rebuild %s: %v", id, err)
		}
		if after := snapshot(t, db, id); after != before {
			t.Fatalf("rebuilt rows of %s differ:\n--- incremental\n%s--- rebuilt\n%s", id, before, after)
		}
		var st string
		if err := db.SQL().Get(&st, `SELECT state FROM runs WHERE run_id = ?`, id); err != nil {
			t.Fatal(err)
		}
		states[st]++
		var taskStates []string
		if err := db.SQL().Select(&taskStates, `SELECT state FROM tasks WHERE run_id = ?`, id); err != nil {
			t.Fatal(err)
		}
		for _, ts := range taskStates {
			states["task "+ts]++
		}
		var retried int
		if err := db.SQL().Get(&retried, `SELECT count(*) FROM tasks WHERE run_id = ? AND attempt > 1`, id); err != nil {
			t.Fatal(err)
		}
		if retried > 0 {
			states["a retry"]++
		}
	}
	// The random mix must have exercised every ending.
	for _, st := range []string{"succeeded", "failed", "uncertain", "task skipped", "task failed", "a retry"} {
		if states[st] == 0 {
			t.Errorf("no random run ended %s (%v)", st, states)
		}
	}
}

func TestInspect_BoundsStreamEventsAndPayloads(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		testInspectBounds(t, b.Open(t, events.Options{Durability: events.DurabilityNormal}))
	})
}

func testInspectBounds(t *testing.T, db *events.DB) {
	big := strings.Repeat("é", 3000) // 6000 bytes of text
	srv := mcptest.Start(t, mcptest.Options{}, tools(big)...)
	src := workflowSource(srv.URL, 0, []testkit.Task{{Idempotency: "idempotent", Tool: "chatty", Arguments: "{n: 1000}"}, {Idempotency: "idempotent", Tool: "big"}})
	wf, err := spec.Parse("bounds.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil || res.Err != nil {
		t.Fatalf("run: %v / %v", err, res.Err)
	}
	doc, err := projector.Inspect(context.Background(), db, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	// The log keeps every frame of t0: 4 session frames + request + 1000 progress + response.
	var logged int
	evs, _ := db.Events(context.Background(), res.RunID)
	var bigBody json.RawMessage
	for _, e := range evs {
		if !strings.HasPrefix(e.Type, vocab.FramePrefix) {
			continue
		}
		if f, err := vocab.DecodeFrame(e); err == nil {
			if f.TaskID == "t0" {
				logged++
			}
			if f.TaskID == "t1" && f.Kind == "response" && f.EffectID != "" {
				bigBody = f.Body
			}
		}
	}
	if logged != 1007 {
		t.Fatalf("log holds %d frames of t0, want 1007", logged)
	}
	perTask := map[string][]projector.StreamEvent{}
	for _, se := range doc.StreamEvents {
		perTask[*se.TaskID] = append(perTask[*se.TaskID], se)
	}
	t0 := perTask["t0"]
	if len(t0) != projector.MaxStreamEventsPerAttempt {
		t.Fatalf("inspect shows %d stream events of t0, want %d", len(t0), projector.MaxStreamEventsPerAttempt)
	}
	last := t0[len(t0)-1]
	if last.Type != projector.TypeStreamTruncated || string(last.Payload) != fmt.Sprintf(`{"dropped":%d}`, 1007-255) {
		t.Fatalf("256th stream event = %s %s, want stream.truncated {\"dropped\":752}", last.Type, last.Payload)
	}
	if len(perTask["t1"]) != 2 { // request and response on the session t0 opened
		t.Fatalf("t1 has %d stream events, want 2", len(perTask["t1"]))
	}
	resp := perTask["t1"][1]
	sum := sha256.Sum256(bigBody)
	want := fmt.Sprintf(`{"originalBytes":%d,"sha256":%q,"truncated":true}`, len(bigBody), hex.EncodeToString(sum[:]))
	if len(bigBody) <= projector.MaxPayloadBytes || string(resp.Payload) != want {
		t.Fatalf("big response payload = %s (body %d bytes), want %s", resp.Payload, len(bigBody), want)
	}
}
