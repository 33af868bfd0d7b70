package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// manyCalls is a workflow of n sequential echo tasks on one server.
func manyCalls(url string, n int) string {
	tasks := make([]testkit.Task, n)
	for i := range tasks {
		tasks[i] = testkit.Task{ID: fmt.Sprintf("t%d", i), Action: "act", Idempotency: "idempotent", Tool: "echo", Arguments: fmt.Sprintf("{message: m%d}", i)}
	}
	return testkit.Workflow{Name: "bench", URL: url, Tasks: tasks}.YAML()
}

// BenchmarkCallOverhead measures, in one run against one go-sdk server and
// the same echo tool: (a) a bare go-sdk client, (b) our transport alone,
// (c) the full durable path per call, (d) the physical floor, one commit
// of a small event; c and d on SQLite (full, normal) and on PostgreSQL.
// Efficiency = (a + 2·d) / c (BENCHMARKS.md).
func BenchmarkCallOverhead(b *testing.B) {
	_, url := demotest.StartTest(b, demoserver.Options{})
	ctx := context.Background()

	b.Run("a=gosdk", func(b *testing.B) {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: transport.ProtocolVersion})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "m"}}); err != nil {
				b.Fatal(err)
			}
		}
	})

	b.Run("b=transport", func(b *testing.B) {
		c, err := transport.New(transport.Config{URL: url, Policy: transport.Policy{AllowPrivate: true, AllowedSchemes: []string{"http"}}})
		if err != nil {
			b.Fatal(err)
		}
		s, err := c.Connect(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close(ctx)
		args := json.RawMessage(`{"message":"m"}`)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.CallTool(ctx, transport.CallRequest{Tool: "echo", Arguments: args}, nil); err != nil {
				b.Fatal(err)
			}
		}
	})

	durable := func(b *testing.B, db *events.DB) {
		wf, err := spec.Parse("bench.yaml", []byte(manyCalls(url, b.N)))
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		res, err := (&workflow.Runner{DB: db}).Run(ctx, wf, nil, workflow.RunOptions{})
		if err != nil || res.Err != nil {
			b.Fatalf("run: %v %v", err, res.Err)
		}
	}
	commit := func(b *testing.B, db *events.DB) {
		payload := json.RawMessage(`{"dir":"in","kind":"notification","method":"notifications/progress","body":{"jsonrpc":"2.0"}}`)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := db.Append(ctx, "run-bench", []events.Record{{Stream: "call/x", Type: "mcp.notification", Payload: payload}}, nil); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, d := range []events.Durability{events.DurabilityFull, events.DurabilityNormal} {
		b.Run("c=durable/"+string(d), func(b *testing.B) { durable(b, openBenchDB(b, d)) })
		b.Run("d=commit/"+string(d), func(b *testing.B) { commit(b, openBenchDB(b, d)) })
	}
	// The same on PostgreSQL (AGENTCTL_TEST_POSTGRES), synchronous_commit on:
	// d is then one PostgreSQL commit.
	b.Run("c=durable/postgres", func(b *testing.B) { durable(b, testkit.OpenDB(b, testkit.PostgresDB(b), events.Options{})) })
	b.Run("d=commit/postgres", func(b *testing.B) { commit(b, testkit.OpenDB(b, testkit.PostgresDB(b), events.Options{})) })
}

// progressTool sends n progress notifications, then answers "done".
func progressTool(name string, n int) mcptest.ToolDef {
	return mcptest.ToolDef{Name: name, Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		for i := 1; i <= n; i++ {
			if err := c.Progress(float64(i), float64(n), ""); err != nil {
				return nil, err
			}
		}
		return &mcptest.Result{Content: mcptest.Text("done")}, nil
	}}
}

func openBenchDB(b *testing.B, d events.Durability) *events.DB {
	b.Helper()
	return testkit.OpenDB(b, "", events.Options{Durability: d})
}

// BenchmarkProgressPersistence streams 10,000 progress notifications from
// one tools/call; each frame is committed before the next is read
// ("frames", frames/s). In the same run it measures the raw rate of one
// small insert per commit with the same payload ("raw": events.Append, no
// projection) and the same with the projection update every frame commit
// carries ("raw+projection": projector.Apply). Target: frames ≥ 0.8 × raw.
func BenchmarkProgressPersistence(b *testing.B) {
	const frames = 10000
	srv := mcptest.Start(b, mcptest.Options{}, progressTool("progress", frames))
	// A progress frame as the run loop records it.
	frame, err := json.Marshal(vocab.Frame{Dir: "in", Kind: "notification", Method: "notifications/progress", Remote: "local", Generation: 1,
		TaskID: "only", Attempt: 1, EffectID: strings.Repeat("ab", 32),
		Body: json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"abababababababab","progress":5000,"total":10000}}`)})
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []events.Durability{events.DurabilityFull, events.DurabilityNormal} {
		// interleaved: each round streams the 10,000 frames through a run,
		// then makes 10,000 raw commits, so both rates see the same machine
		// (this VM's speed drifts between minutes); ratio = frames ÷ raw.
		b.Run("interleaved/"+string(d), func(b *testing.B) {
			fdb, rdb := openBenchDB(b, d), openBenchDB(b, d)
			wf, err := spec.Parse("bench.yaml", []byte(oneCall(srv.URL, "progress", "pure", "{}")))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			rec := []events.Record{{Stream: "call/" + strings.Repeat("ab", 32), Type: vocab.FramePrefix + "notification", Payload: json.RawMessage(frame)}}
			var tf, tr time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				res, err := (&workflow.Runner{DB: fdb}).Run(ctx, wf, nil, workflow.RunOptions{})
				if err != nil || res.Err != nil {
					b.Fatalf("run: %v %v", err, res.Err)
				}
				t1 := time.Now()
				for j := 0; j < frames; j++ {
					if _, err := rdb.Append(ctx, "run-raw", rec, nil); err != nil {
						b.Fatal(err)
					}
				}
				tf, tr = tf+t1.Sub(t0), tr+time.Since(t1)
			}
			fps, rps := float64(frames*b.N)/tf.Seconds(), float64(frames*b.N)/tr.Seconds()
			b.ReportMetric(fps, "frames/s")
			b.ReportMetric(rps, "raw/s")
			b.ReportMetric(fps/rps, "ratio")
		})
		b.Run("frames/"+string(d), func(b *testing.B) {
			db := openBenchDB(b, d)
			wf, err := spec.Parse("bench.yaml", []byte(oneCall(srv.URL, "progress", "pure", "{}")))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
				if err != nil || res.Err != nil {
					b.Fatalf("run: %v %v", err, res.Err)
				}
			}
			b.ReportMetric(float64(frames*b.N)/b.Elapsed().Seconds(), "frames/s")
		})
		for _, apply := range []bool{false, true} {
			name := "raw/"
			if apply {
				name = "raw+projection/"
			}
			b.Run(name+string(d), func(b *testing.B) {
				db := openBenchDB(b, d)
				ctx := context.Background()
				var applier events.Applier
				if apply {
					applier = projector.Apply
					if _, err := db.Append(ctx, "run-raw", []events.Record{{Stream: "run", Type: vocab.TypeRunCreated,
						Payload: vocab.RunCreated{RunID: "run-raw", Workflow: "bench", Mode: "run"}}}, applier); err != nil {
						b.Fatal(err)
					}
				}
				rec := []events.Record{{Stream: "call/" + strings.Repeat("ab", 32), Type: vocab.FramePrefix + "notification", Payload: json.RawMessage(frame)}}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := db.Append(ctx, "run-raw", rec, applier); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
			})
		}
	}
}

// BenchmarkCallEfficiency measures a, c and d of BenchmarkCallOverhead
// interleaved in rounds of callsPerRound (a's calls, then one workflow of
// callsPerRound echo tasks, then callsPerRound single-event commits), so
// that all three see the same machine: on a shared VM the speed drifts by
// tens of percent between minutes, which separate sub-benchmarks would
// fold into the ratio. It reports each per call and eff = (a + 2·d) / c,
// on SQLite (full, normal) and on PostgreSQL.
func BenchmarkCallEfficiency(b *testing.B) {
	const callsPerRound = 100
	_, url := demotest.StartTest(b, demoserver.Options{})
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: transport.ProtocolVersion})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	wf, err := spec.Parse("bench.yaml", []byte(manyCalls(url, callsPerRound)))
	if err != nil {
		b.Fatal(err)
	}
	payload := json.RawMessage(`{"dir":"in","kind":"notification","method":"notifications/progress","body":{"jsonrpc":"2.0"}}`)
	// SQLite at both durabilities, and PostgreSQL (AGENTCTL_TEST_POSTGRES;
	// skipped without it outside CI) with synchronous_commit on: d is then
	// one PostgreSQL commit.
	backends := []struct {
		name string
		open func(b *testing.B) *events.DB
	}{
		{string(events.DurabilityFull), func(b *testing.B) *events.DB { return openBenchDB(b, events.DurabilityFull) }},
		{string(events.DurabilityNormal), func(b *testing.B) *events.DB { return openBenchDB(b, events.DurabilityNormal) }},
		{"postgres", func(b *testing.B) *events.DB { return testkit.OpenDB(b, testkit.PostgresDB(b), events.Options{}) }},
	}
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			cdb, ddb := be.open(b), be.open(b)
			var ta, tc, td time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				for j := 0; j < callsPerRound; j++ {
					if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "m"}}); err != nil {
						b.Fatal(err)
					}
				}
				t1 := time.Now()
				res, err := (&workflow.Runner{DB: cdb}).Run(ctx, wf, nil, workflow.RunOptions{})
				if err != nil || res.Err != nil {
					b.Fatalf("run: %v %v", err, res.Err)
				}
				t2 := time.Now()
				for j := 0; j < callsPerRound; j++ {
					if _, err := ddb.Append(ctx, "run-bench", []events.Record{{Stream: "call/x", Type: "mcp.notification", Payload: payload}}, nil); err != nil {
						b.Fatal(err)
					}
				}
				ta, tc, td = ta+t1.Sub(t0), tc+t2.Sub(t1), td+time.Since(t2)
			}
			n := float64(b.N * callsPerRound)
			a, cc, dd := float64(ta)/n, float64(tc)/n, float64(td)/n
			b.ReportMetric(a/1e3, "a-µs/call")
			b.ReportMetric(cc/1e3, "c-µs/call")
			b.ReportMetric(dd/1e3, "d-µs/commit")
			b.ReportMetric((a+2*dd)/cc, "eff")
		})
	}
}
