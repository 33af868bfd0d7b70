package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// BenchmarkReportHTML compares `inspect RUN --html -o -` with `inspect RUN
// --output json` (the CLI in-process, output discarded) on one recorded run
// of 100k events, almost all progress frames of one call. The report reads
// the log once (projector.InspectEach) and checks the chain from the same
// read; target: html within 2× inspect-json. It reports the page's size
// (report-bytes) beside the JSON's (json-bytes): the stream events are
// capped as in inspect and the timeline aggregates the progress.
func BenchmarkReportHTML(b *testing.B) {
	const n = 100_000
	db := filepath.Join(b.TempDir(), "big.db")
	runID, err := genBigRun(db, n)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, metric string
		args         []string
	}{
		{"inspect-json", "json-bytes", []string{"inspect", runID, "--db", db, "--output", "json"}},
		{"html", "report-bytes", []string{"inspect", runID, "--db", db, "--html", "-o", "-"}},
	} {
		b.Run(c.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				w := &countingWriter{}
				var stderr bytes.Buffer
				if code := execute(context.Background(), c.args, w, &stderr); code != 0 {
					b.Fatalf("%v: exit %d %s", c.args, code, stderr.String())
				}
				size = w.n
			}
			b.ReportMetric(float64(size), c.metric)
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
	// The ratio, with the two commands alternating so that both see the
	// same load on a shared machine: ns/op is one of each. Wall time, and
	// the process's CPU time (getrusage), which a loaded machine distorts
	// less; the report's chain check runs beside its read, so its wall
	// ratio is lower than its CPU ratio on an idle machine.
	b.Run("ratio", func(b *testing.B) {
		var took, cpu [2]time.Duration
		for b.Loop() {
			for i, args := range [][]string{
				{"inspect", runID, "--db", db, "--output", "json"},
				{"inspect", runID, "--db", db, "--html", "-o", "-"},
			} {
				start, cpu0 := time.Now(), cpuTime(b)
				var stderr bytes.Buffer
				if code := execute(context.Background(), args, io.Discard, &stderr); code != 0 {
					b.Fatalf("%v: exit %d %s", args, code, stderr.String())
				}
				took[i] += time.Since(start)
				cpu[i] += cpuTime(b) - cpu0
			}
		}
		b.ReportMetric(float64(took[1])/float64(took[0]), "wall-html/json")
		b.ReportMetric(float64(cpu[1])/float64(cpu[0]), "cpu-html/json")
	})
}

// cpuTime is the user and system time this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

type countingWriter struct{ n int }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

var _ io.Writer = (*countingWriter)(nil)

// genBigRun writes to path a finished run of exactly n events: a real run
// (one call to a tool that sends 3 progress notifications, against mcptest
// on 127.0.0.1) recorded in a scratch database, copied with its first
// progress frame repeated until the run has n events, through events.Append
// and projector.Apply in batches, so the chain and the projections are the
// ones a live run writes.
func genBigRun(path string, n int) (string, error) {
	ctx := context.Background()
	srv := mcptest.NewServer(mcptest.Options{}, mcptest.ToolDef{Name: "progress", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		for i := 1; i <= 3; i++ {
			if err := c.Progress(float64(i), 3, "step"); err != nil {
				return nil, err
			}
		}
		return &mcptest.Result{Content: mcptest.Text("done")}, nil
	}})
	defer srv.Close()
	scratch, err := events.Open(ctx, path+".scratch", events.Options{Durability: events.DurabilityNormal})
	if err != nil {
		return "", err
	}
	defer scratch.Close()
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: big}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    s: {url: %q, timeoutSeconds: 30}
  actions:
    call: {kind: mcp.call, idempotency: pure}
  tasks:
    - {id: only, uses: action:call, with: {server: s, tool: progress}}
`, srv.URL)
	wf, err := spec.Parse("big.yaml", []byte(src))
	if err != nil {
		return "", err
	}
	const runID = "run-big"
	res, err := (&workflow.Runner{DB: scratch, NewRunID: func() string { return runID }}).Run(ctx, wf, nil, workflow.RunOptions{})
	if err != nil || res.Err != nil {
		return "", fmt.Errorf("record: %v %v", err, res.Err)
	}
	evs, err := scratch.Events(ctx, runID)
	if err != nil {
		return "", err
	}
	db, err := events.Open(ctx, path, events.Options{Durability: events.DurabilityNormal})
	if err != nil {
		return "", err
	}
	defer db.Close()
	var recs []events.Record
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		_, err := db.Append(ctx, runID, recs, projector.Apply)
		recs = recs[:0]
		return err
	}
	copied := false
	for _, e := range evs {
		r := events.Record{Stream: e.Stream, Type: e.Type, Payload: json.RawMessage(e.Payload)}
		times := 1
		if !copied && e.Type == vocab.FramePrefix+"notification" && strings.Contains(e.Payload, "notifications/progress") {
			copied, times = true, 1+n-len(evs)
		}
		for range times {
			if recs = append(recs, r); len(recs) == 10_000 {
				if err := flush(); err != nil {
					return "", err
				}
			}
		}
	}
	if !copied || n < len(evs) {
		return "", fmt.Errorf("the recorded run (%d events) has no progress frame or more than %d events", len(evs), n)
	}
	if err := flush(); err != nil {
		return "", err
	}
	_, err = db.SQL().ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return runID, err
}
