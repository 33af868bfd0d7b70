package workflow_test

import (
	"context"
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

// benchInFlight is BenchmarkConcurrentCalls and BenchmarkSlowTools: each
// round makes width×depth calls of tool twice, interleaved so that both
// see the same machine: width goroutines of bare go-sdk clients (one
// session each, depth calls in sequence), then one agentctl run of width
// independent chains of depth tasks with spec.concurrency = width. It
// reports both per round and ratio = bare time / agentctl time.
func benchInFlight(b *testing.B, opts demoserver.Options, tool string, args map[string]any) {
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
			db := openBenchDB(b, d)
			var bare, ours time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				var wg sync.WaitGroup
				errs := make(chan error, width)
				for _, s := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						for range depth {
							if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args}); err != nil {
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
				t1 := time.Now()
				res, err := (&workflow.Runner{DB: db}).Run(ctx, wf, nil, workflow.RunOptions{})
				if err != nil || res.Err != nil {
					b.Fatalf("run: %v %v", err, res.Err)
				}
				bare, ours = bare+t1.Sub(t0), ours+time.Since(t1)
			}
			n := float64(b.N)
			b.ReportMetric(float64(bare)/n/1e6, "bare-ms/round")
			b.ReportMetric(float64(ours)/n/1e6, "agentctl-ms/round")
			b.ReportMetric(float64(bare)/float64(ours), "ratio")
		})
	}
}

// BenchmarkConcurrentCalls: 64 calls of the echo tool on one go-sdk server
// on 127.0.0.1, 8 in flight (issue 14; target ratio ≥ 0.7 at FULL).
func BenchmarkConcurrentCalls(b *testing.B) {
	benchInFlight(b, demoserver.Options{}, "echo", map[string]any{"message": "m"})
}

// BenchmarkSlowTools: 64 calls of a tool that takes 50 ms (analyze, one
// step after a 50 ms delay), 8 in flight (issue 14; target ratio ≥ 0.9).
func BenchmarkSlowTools(b *testing.B) {
	benchInFlight(b, demoserver.Options{StepDelay: 50 * time.Millisecond}, "analyze", map[string]any{"text": "a b c", "steps": 1})
}
