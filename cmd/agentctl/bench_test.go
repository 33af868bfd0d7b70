package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// buildAgentctl builds the CLI once into a temp dir: these benchmarks
// measure separate processes, as users run them.
func buildAgentctl(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "agentctl")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// benchWorkflow writes a workflow of n sequential calls of tool on url.
func benchWorkflow(b *testing.B, url, tool string, n int) string {
	b.Helper()
	tasks := make([]testkit.Task, n)
	for i := range tasks {
		tasks[i] = testkit.Task{ID: fmt.Sprintf("t%d", i), Action: "call", Idempotency: "at_most_once", Tool: tool}
	}
	return testkit.Workflow{Name: "bench", Server: "s", URL: url, Tasks: tasks}.WriteFile(b)
}

// BenchmarkBoundedMemory runs the built binary against a server that
// streams 1 GiB of SSE log notifications in answer to tools/call: the
// client must stop at the response byte bound (4 MiB by default), with
// every frame before it persisted. It reports the process's peak RSS
// (getrusage ru_maxrss, what /usr/bin/time -v prints), target < 64 MiB.
func BenchmarkBoundedMemory(b *testing.B) {
	bin := buildAgentctl(b)
	srv := mcptest.Start(b, mcptest.Options{}, mcptest.ToolDef{Name: "a"})
	wf := benchWorkflow(b, srv.URL, "a", 1)
	var peak int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Flood: 1 << 30})
		db := filepath.Join(b.TempDir(), "a.db")
		cmd := exec.Command(bin, "run", wf, "--db", db, "--durability", "normal", "--output", "json")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 3 || !strings.Contains(stderr.String(), "response too large") {
			b.Fatalf("run: %v, want exit 3 and response too large; stderr %s", err, stderr.String())
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && ru.Maxrss > peak {
			peak = ru.Maxrss // KiB on Linux
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(peak)/1024, "peak-RSS-MiB")
	if peak > 64<<10 {
		b.Errorf("peak RSS %d KiB, budget 64 MiB", peak)
	}
}

// BenchmarkParallelRuns starts 8 `agentctl run` processes at once on one
// database, each making 25 sequential echo-like calls on one mcptest
// server on 127.0.0.1, and reports total calls/s across them. Any process
// that fails (in particular with "database is locked") fails the benchmark.
func BenchmarkParallelRuns(b *testing.B) {
	const procs, calls = 8, 25
	bin := buildAgentctl(b)
	srv := mcptest.Start(b, mcptest.Options{}, mcptest.ToolDef{Name: "a"})
	wf := benchWorkflow(b, srv.URL, "a", calls)
	for _, d := range []string{"full", "normal"} {
		b.Run(d, func(b *testing.B) {
			db := filepath.Join(b.TempDir(), "shared.db")
			// Create and migrate the database before the race starts.
			edb, err := events.Open(context.Background(), db, events.Options{})
			if err != nil {
				b.Fatal(err)
			}
			_ = edb.Close()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				errs := make([]string, procs)
				for p := 0; p < procs; p++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						out, err := exec.Command(bin, "run", wf, "--db", db, "--durability", d, "--output", "json").CombinedOutput()
						if err != nil || bytes.Contains(out, []byte("database is locked")) {
							errs[p] = fmt.Sprintf("process %d: %v\n%s", p, err, out)
						}
					}()
				}
				wg.Wait()
				for _, e := range errs {
					if e != "" {
						b.Fatal(e)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(procs*calls*b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}
