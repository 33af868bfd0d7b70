package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// benchBinEnv names a prebuilt agentctl for BenchmarkProcessStartup to
// measure instead of building this tree's: an older commit's binary, for
// an interleaved A/B of the same benchmark (BENCHMARKS.md, "Process startup").
const benchBinEnv = "AGENTCTL_BENCH_BIN"

// BenchmarkProcessStartup execs the built binary once per op, as a user
// or a script runs it, and reports the child's CPU (user+system, from its
// rusage) per process beside the wall time (ns/op): `version` (package
// init and nothing else), `submit` of a one-call workflow on SQLite and on
// PostgreSQL (AGENTCTL_TEST_POSTGRES), and a one-call `run` against an
// MCP server on 127.0.0.1. A process that fails fails the benchmark.
func BenchmarkProcessStartup(b *testing.B) {
	bin := os.Getenv(benchBinEnv)
	if bin == "" {
		bin = buildAgentctl(b)
	}
	srv := mcptest.Start(b, mcptest.Options{}, mcptest.ToolDef{Name: "a"})
	wf := benchWorkflow(b, srv.URL, "a", 1)
	sqliteDB := func(b *testing.B) string {
		db := filepath.Join(b.TempDir(), "a.db")
		edb, err := events.Open(context.Background(), db, events.Options{})
		if err != nil {
			b.Fatal(err)
		}
		_ = edb.Close()
		return db
	}
	cases := []struct {
		name string
		db   func(b *testing.B) string // "" for no database
		args []string
	}{
		{"version", nil, []string{"version"}},
		{"submit-sqlite", sqliteDB, []string{"submit", wf}},
		{"submit-postgres", func(b *testing.B) string { return testkit.PostgresDB(b) }, []string{"submit", wf}},
		{"run-1call-sqlite", sqliteDB, []string{"run", wf, "--output", "json"}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			args := c.args
			if c.db != nil {
				args = append([]string{"--db", c.db(b)}, args...)
			}
			var cpu time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cpu += execForCPU(b, bin, args)
			}
			b.StopTimer()
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// execForCPU runs bin with args, fails b unless it exits 0, and returns the
// child's user+system CPU time.
func execForCPU(b *testing.B, bin string, args []string) time.Duration {
	b.Helper()
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v\n%s", bin, args, err, out.String())
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatalf("no rusage for %s %v", bin, args)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
