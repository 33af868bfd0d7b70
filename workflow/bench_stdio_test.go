package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// buildDemoServer builds agentctl once into a temporary directory: its
// `demo serve --stdio` is the stdio server both clients start.
func buildDemoServer(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "agentctl")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/agentctl/agentctl/cmd/agentctl").CombinedOutput()
	if err != nil {
		b.Fatalf("go build ./cmd/agentctl: %v\n%s", err, out)
	}
	return bin
}

// BenchmarkStdioCallEfficiency compares, interleaved in rounds on the same
// server binary (the go-sdk demo server, `agentctl demo serve --stdio`):
// (a) the go-sdk client over mcp.CommandTransport: start the process,
// initialize, callsPerRound echo calls, close; (c) agentctl: one workflow
// of callsPerRound echo tasks on one stdio server (start, initialize,
// tools/list, the calls, every frame committed before the next is read,
// close); (d) one commit of a small event, callsPerRound times. It reports
// per call a, c, d, ratio = a / c, and eff = (a + 2·d) / c (as
// BenchmarkCallEfficiency: two commits per call are the durable floor), at
// durability full and normal. Target: eff ≥ 0.8 at full (BENCHMARKS.md).
func BenchmarkStdioCallEfficiency(b *testing.B) {
	// Each round starts the server once per client: enough calls that
	// the start (tens of ms for a Go binary) does not decide the ratio.
	const callsPerRound = 500
	bin := buildDemoServer(b)
	ctx := context.Background()
	serve := []string{bin, "demo", "serve", "--stdio"}
	tasks := make([]testkit.Task, callsPerRound)
	for i := range tasks {
		tasks[i] = testkit.Task{ID: fmt.Sprintf("t%d", i), Action: "act", Idempotency: "idempotent", Tool: "echo", Arguments: fmt.Sprintf("{message: m%d}", i)}
	}
	wf, err := spec.Parse("bench.yaml", []byte(testkit.Workflow{Name: "bench-stdio", Command: serve, ServerKeys: []string{"shutdownGraceSeconds: 1"}, Tasks: tasks}.YAML()))
	if err != nil {
		b.Fatal(err)
	}
	// The go-sdk client's server gets what agentctl gives its own: the
	// minimal set of variables, nothing else.
	var env []string
	for _, k := range transport.StdioBaseEnv {
		if v := os.Getenv(k); v != "" {
			env = append(env, k+"="+v)
		}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, nil)
	gosdk := func() {
		cmd := exec.Command(serve[0], serve[1:]...)
		cmd.Env = env
		s, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: transport.ProtocolVersion})
		if err != nil {
			b.Fatal(err)
		}
		for j := 0; j < callsPerRound; j++ {
			if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": fmt.Sprintf("m%d", j)}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	payload := json.RawMessage(`{"dir":"in","kind":"notification","method":"notifications/progress","body":{"jsonrpc":"2.0"}}`)
	for _, d := range []events.Durability{events.DurabilityFull, events.DurabilityNormal} {
		b.Run(string(d), func(b *testing.B) {
			cdb, ddb := openBenchDB(b, d), openBenchDB(b, d)
			var ta, tc, td time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				gosdk()
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
			b.ReportMetric(a/cc, "ratio")
			b.ReportMetric((a+2*dd)/cc, "eff")
		})
	}
}
