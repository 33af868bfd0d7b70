package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
	"github.com/agentctl/agentctl/workflow/spec"
)

// scaleRunID is the synthetic recorded run in every scale database.
const scaleRunID = "run-scale"

// BenchmarkInspectReplayScale measures inspect and replay of one recorded
// run of 10k and 100k events (and 1M with AGENTCTL_BENCH_1M=1): events/s
// (the run's events over the time of one inspect or one replay) and the
// peak heap seen while doing it. Cost should be linear in the events.
func BenchmarkInspectReplayScale(b *testing.B) {
	sizes := []int{10_000, 100_000}
	if os.Getenv("AGENTCTL_BENCH_1M") == "1" {
		sizes = append(sizes, 1_000_000)
	}
	dir := b.TempDir()
	for _, n := range sizes {
		name := fmt.Sprintf("%dk", n/1000)
		path := filepath.Join(dir, name+".db")
		// Generated once per size, outside any timed region.
		if err := genScaleRun(path, n); err != nil {
			b.Fatal(err)
		}
		b.Run("inspect/"+name, func(b *testing.B) {
			db := openScaleDB(b, path)
			peak := watchHeap()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				doc, err := projector.Inspect(context.Background(), db, scaleRunID)
				if err != nil {
					b.Fatal(err)
				}
				if doc.Run.Events != int64(n) {
					b.Fatalf("inspect saw %d events, want %d", doc.Run.Events, n)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MiB")
		})
		b.Run("replay/"+name, func(b *testing.B) {
			db := openScaleDB(b, path)
			peak := watchHeap()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				replayOnce(b, db, n)
			}
			b.StopTimer()
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(peak())/(1<<20), "peak-heap-MiB")
		})
	}
}

// replayOnce replays the scale run into a new replay run and checks that it
// succeeded and accounts for every event.
func replayOnce(b *testing.B, db *events.DB, n int) {
	ctx := context.Background()
	rp, err := replay.Prepare(ctx, db, scaleRunID)
	if err != nil {
		b.Fatal(err)
	}
	res, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(ctx, rp.Workflow, rp.Inputs, workflow.RunOptions{Mode: "replay", SourceRunID: scaleRunID, Command: "replay"})
	if err != nil || res.Err != nil {
		b.Fatalf("replay: %v %v", err, res.Err)
	}
	// The replay records its own steps and references the source's frames
	// (replay.frames): together they must account for every source event.
	var own, referenced int64
	err = db.Scan(ctx, res.RunID, 0, func(e events.Event) error {
		if e.Type != vocab.TypeReplayFrames {
			own++
			return nil
		}
		var r vocab.ReplayFrames
		if err := e.Decode(&r); err != nil {
			return err
		}
		referenced += r.Count
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	if own+referenced != int64(n) {
		b.Fatalf("replay recorded %d events and referenced %d frames, want %d in all", own, referenced, n)
	}
}

func openScaleDB(b *testing.B, path string) *events.DB {
	b.Helper()
	db, err := events.Open(context.Background(), path, events.Options{Durability: events.DurabilityNormal})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	return db
}

// genScaleRun writes to path a finished run of exactly n events: a real
// recorded run (one call to a tool that sends 3 progress notifications,
// against mcptest on 127.0.0.1) whose first progress frame is repeated
// until the run has n events. The copies go through events.Append with
// projector.Apply in batches of 10,000, so the hash chain and the
// projections are the ones a live run would have written, and replay has
// real evidence to answer from.
func genScaleRun(path string, n int) error {
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
		return err
	}
	defer func() { _ = scratch.Close(); _ = os.Remove(path + ".scratch") }()
	wf, err := spec.Parse("scale.yaml", []byte(oneCall(srv.URL, "progress", "pure", "{}")))
	if err != nil {
		return err
	}
	res, err := (&workflow.Runner{DB: scratch, NewRunID: func() string { return scaleRunID }}).Run(ctx, wf, nil, workflow.RunOptions{})
	if err != nil || res.Err != nil {
		return fmt.Errorf("record: %v %v", err, res.Err)
	}
	src, err := scratch.Events(ctx, scaleRunID)
	if err != nil {
		return err
	}
	extra := n - len(src)
	if extra < 0 {
		return fmt.Errorf("the recorded run has %d events, more than %d", len(src), n)
	}
	db, err := events.Open(ctx, path, events.Options{Durability: events.DurabilityNormal})
	if err != nil {
		return err
	}
	defer db.Close()
	const batch = 10_000
	var recs []events.Record
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		_, err := db.Append(ctx, scaleRunID, recs, projector.Apply)
		recs = recs[:0]
		return err
	}
	add := func(r events.Record) error {
		recs = append(recs, r)
		if len(recs) == batch {
			return flush()
		}
		return nil
	}
	copied := false
	for _, e := range src {
		r := events.Record{Stream: e.Stream, Type: e.Type, Payload: json.RawMessage(e.Payload)}
		if err := add(r); err != nil {
			return err
		}
		if !copied && e.Type == vocab.FramePrefix+"notification" && strings.Contains(e.Payload, "notifications/progress") {
			copied = true
			for i := 0; i < extra; i++ {
				if err := add(r); err != nil {
					return err
				}
			}
		}
	}
	if !copied {
		return fmt.Errorf("the recorded run has no progress frame")
	}
	if err := flush(); err != nil {
		return err
	}
	// Start every measurement from a checkpointed file.
	_, err = db.SQL().ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// watchHeap samples the live heap (runtime/metrics) every millisecond from
// now until the returned function is called, which reports the peak.
func watchHeap() func() uint64 {
	runtime.GC()
	var peak atomic.Uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(stop)
		wg.Wait()
		return peak.Load()
	}
}
