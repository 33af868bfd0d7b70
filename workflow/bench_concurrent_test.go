package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// chains is a workflow of width independent chains of depth tasks each
// (a chain's first task has needs: [], the others wait for the previous
// one), spec.concurrency = width, every task one call of tool with args.
func chains(url string, width, depth int, tool, args string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: bench-chains}
spec:
  concurrency: %d
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    act: {kind: mcp.call, idempotency: idempotent}
  tasks:
`, width, url)
	for c := range width {
		for d := range depth {
			needs := fmt.Sprintf("[c%d_%d]", c, d-1)
			if d == 0 {
				needs = "[]"
			}
			fmt.Fprintf(&b, "    - {id: c%d_%d, uses: action:act, needs: %s, with: {server: local, tool: %s, arguments: %s}}\n", c, d, needs, tool, args)
		}
	}
	return b.String()
}

// inFlight runs width goroutines at once, goroutine g calling call(g) n
// times in sequence, and fails b with the first error.
func inFlight(b *testing.B, width, n int, call func(g int) error) {
	var wg sync.WaitGroup
	errs := make(chan error, width)
	for g := range width {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if err := call(g); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// benchInFlight is BenchmarkConcurrentCalls and BenchmarkSlowTools: each
// round makes width×depth calls of tool twice, interleaved so that both
// see the same machine: width goroutines of bare go-sdk clients (one
// session each, depth calls in sequence), then one agentctl run of width
// independent chains of depth tasks with spec.concurrency = width. It
// reports both per round and ratio = bare time / agentctl time, each
// half's process CPU per round (user + system: on two cores the bare half
// alone is nearly CPU-bound, BENCHMARKS.md session 8), the run's
// commits and appends per call (events.DB.CommitStats), and a third term
// of the same round, the commit floor: width goroutines each making
// depth×floorCommits one-event appends in sequence (no projection) on a
// database of the same durability, i.e. the least storage time a lane
// waits for when each call needs floorCommits commits on its critical
// path; bound = bare / (bare + floor) is the ratio that floor alone allows.
// With pooled, agentctl's runs share a SessionPool, as a worker's and `run
// --inputs`'s do, so that after the first round each run borrows a
// session opened before its clock starts, as the bare clients' are.
func benchInFlight(b *testing.B, opts demoserver.Options, tool string, args map[string]any, floorCommits int, pooled bool) {
	const width, depth = 8, 8
	_, url := demotest.StartTest(b, opts)
	ctx := context.Background()
	sessions := make([]*mcp.ClientSession, width)
	for i := range sessions {
		c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
		s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: transport.ProtocolVersion})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		sessions[i] = s
	}
	var flow []string
	for k, v := range args {
		flow = append(flow, fmt.Sprintf("%s: %v", k, v))
	}
	wf, err := spec.Parse("bench.yaml", []byte(chains(url, width, depth, tool, "{"+strings.Join(flow, ", ")+"}")))
	if err != nil {
		b.Fatal(err)
	}
	for _, d := range []events.Durability{events.DurabilityFull, events.DurabilityNormal} {
		b.Run(string(d), func(b *testing.B) {
			db, fdb := openBenchDB(b, d), openBenchDB(b, d)
			payload := json.RawMessage(`{"dir":"in","kind":"notification","method":"notifications/progress","body":{"jsonrpc":"2.0"}}`)
			var bare, ours, floor, bareCPU, oursCPU time.Duration
			runner := &workflow.Runner{DB: db}
			if pooled {
				runner.Sessions = workflow.NewSessionPool()
				defer runner.Sessions.Close()
			}
			s0 := db.CommitStats()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				c0, t0 := processCPU(b), time.Now()
				inFlight(b, width, depth, func(g int) error {
					_, err := sessions[g].CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
					return err
				})
				c1, t1 := processCPU(b), time.Now()
				res, err := runner.Run(ctx, wf, nil, workflow.RunOptions{})
				if err != nil || res.Err != nil {
					b.Fatalf("run: %v %v", err, res.Err)
				}
				c2, t2 := processCPU(b), time.Now()
				bareCPU, oursCPU = bareCPU+c1-c0, oursCPU+c2-c1
				inFlight(b, width, depth*floorCommits, func(w int) error {
					rec := []events.Record{{Stream: fmt.Sprintf("call/%d", w), Type: "mcp.notification", Payload: payload}}
					_, err := fdb.Append(ctx, "run-floor", rec, nil)
					return err
				})
				bare, ours, floor = bare+t1.Sub(t0), ours+t2.Sub(t1), floor+time.Since(t2)
			}
			n := float64(b.N)
			st := db.CommitStats()
			calls := n * width * depth
			b.ReportMetric(float64(bare)/n/1e6, "bare-ms/round")
			b.ReportMetric(float64(ours)/n/1e6, "agentctl-ms/round")
			b.ReportMetric(float64(bare)/float64(ours), "ratio")
			b.ReportMetric(float64(bareCPU)/n/1e6, "bare-cpu-ms/round")
			b.ReportMetric(float64(oursCPU)/n/1e6, "agentctl-cpu-ms/round")
			b.ReportMetric(float64(st.Commits-s0.Commits)/calls, "commits/call")
			b.ReportMetric(float64(st.Appends-s0.Appends)/calls, "appends/call")
			b.ReportMetric(float64(floor)/n/1e6, "floor-ms/round")
			b.ReportMetric(float64(bare)/float64(bare+floor), "bound")
		})
	}
}

// BenchmarkConcurrentCalls: 64 calls of the echo tool on one go-sdk server
// on 127.0.0.1, 8 in flight (issue 14; target ratio ≥ 0.7 at FULL).
func BenchmarkConcurrentCalls(b *testing.B) {
	// One commit per call on a lane's critical path: the request's (it
	// carries the previous call's outcome).
	benchInFlight(b, demoserver.Options{}, "echo", map[string]any{"message": "m"}, 1, false)
}

// BenchmarkConcurrentCallsPooled is BenchmarkConcurrentCalls with the
// runs borrowing their session from a SessionPool (the first round opens
// it), like for like with the bare clients, whose sessions are connected
// before the clock starts. BenchmarkConcurrentCalls, a fresh session per
// round, stays issue 28's measure.
func BenchmarkConcurrentCallsPooled(b *testing.B) {
	benchInFlight(b, demoserver.Options{}, "echo", map[string]any{"message": "m"}, 1, true)
}

// BenchmarkSlowTools: 64 calls of a tool that takes 50 ms (analyze, one
// step after a 50 ms delay), 8 in flight (issue 14; target ratio ≥ 0.9).
func BenchmarkSlowTools(b *testing.B) {
	// Two: the request's, and the progress notification's, which is on
	// disk before the response is read (the bare client asks for no
	// progress, so its server sends none).
	benchInFlight(b, demoserver.Options{StepDelay: 50 * time.Millisecond}, "analyze", map[string]any{"text": "a b c", "steps": 1}, 2, false)
}

// BenchmarkSessionSharing asks whether width tasks sharing one MCP
// session (as a run's tasks do) pay for it: each round makes width×depth
// calls, width in flight, three ways, interleaved: bare go-sdk clients on
// a session each, package transport (no storage) on a session each, and
// package transport with every goroutine on one shared session. It runs
// the echo tool and the 50 ms tool of BenchmarkSlowTools; transport asks
// for progress as a run does.
func BenchmarkSessionSharing(b *testing.B) {
	const width, depth = 8, 8
	for _, bc := range []struct {
		name string
		opts demoserver.Options
		tool string
		args string
	}{
		{"echo", demoserver.Options{}, "echo", `{"message":"m"}`},
		{"slow", demoserver.Options{StepDelay: 50 * time.Millisecond}, "analyze", `{"text":"a b c","steps":1}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			_, url := demotest.StartTest(b, bc.opts)
			ctx := context.Background()
			var margs map[string]any
			if err := json.Unmarshal([]byte(bc.args), &margs); err != nil {
				b.Fatal(err)
			}
			gs := make([]*mcp.ClientSession, width)
			for i := range gs {
				c := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
				s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: transport.ProtocolVersion})
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				gs[i] = s
			}
			tc, err := transport.New(transport.Config{URL: url, Policy: transport.Policy{AllowPrivate: true, AllowedSchemes: []string{"http"}}})
			if err != nil {
				b.Fatal(err)
			}
			ts := make([]*transport.Session, width)
			for i := range ts {
				if ts[i], err = tc.Connect(ctx, nil); err != nil {
					b.Fatal(err)
				}
				defer ts[i].Close(ctx)
			}
			// timed runs call width times at once, depth calls each, and
			// returns the wall time.
			timed := func(call func(g int) error) time.Duration {
				t0 := time.Now()
				inFlight(b, width, depth, call)
				return time.Since(t0)
			}
			req := transport.CallRequest{Tool: bc.tool, Arguments: json.RawMessage(bc.args), ProgressToken: "0123456789abcdef"}
			var tg, town, tshared time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				tg += timed(func(g int) error {
					_, err := gs[g].CallTool(ctx, &mcp.CallToolParams{Name: bc.tool, Arguments: margs})
					return err
				})
				town += timed(func(g int) error { _, err := ts[g].CallTool(ctx, req, nil); return err })
				tshared += timed(func(int) error { _, err := ts[0].CallTool(ctx, req, nil); return err })
			}
			n := float64(b.N)
			b.ReportMetric(float64(tg)/n/1e6, "gosdk-ms/round")
			b.ReportMetric(float64(town)/n/1e6, "transport-own-ms/round")
			b.ReportMetric(float64(tshared)/n/1e6, "transport-shared-ms/round")
			b.ReportMetric(float64(tshared)/float64(town), "shared/own")
		})
	}
}
