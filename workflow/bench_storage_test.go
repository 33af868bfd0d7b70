//go:build unix

package workflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// typedPayload decodes a recorded payload into the projector's type for
// its event, as the run loop hands it to Append (frames stay raw JSON).
func typedPayload(b *testing.B, typ, payload string) any {
	decoders := map[string]func([]byte) (any, error){
		vocab.TypeRunCreated:      decodeAs[vocab.RunCreated],
		vocab.TypeRunFinished:     decodeAs[vocab.RunFinished],
		vocab.TypeTaskStarted:     decodeAs[vocab.TaskStarted],
		vocab.TypeTaskFinished:    decodeAs[vocab.TaskFinished],
		vocab.TypeSessionOpened:   decodeAs[vocab.SessionOpened],
		vocab.TypeSessionCatalog:  decodeAs[vocab.SessionCatalog],
		vocab.TypeSessionAttached: decodeAs[vocab.SessionRef],
		vocab.TypeCallPrepared:    decodeAs[vocab.CallPrepared],
		vocab.TypeCallTransition:  decodeAs[vocab.CallTransition],
		vocab.TypeCallResult:      decodeAs[vocab.CallResult],
	}
	decode, ok := decoders[typ]
	if !ok {
		return json.RawMessage(payload)
	}
	v, err := decode([]byte(payload))
	if err != nil {
		b.Fatalf("%s: %v", typ, err)
	}
	return v
}

// decodeAs decodes data into a T, returned by value.
func decodeAs[T any](data []byte) (any, error) {
	var v T
	err := json.Unmarshal(data, &v)
	return v, err
}

// processCPU is the CPU time (user + system) this process has used: less
// sensitive than wall time to a neighbour on a shared machine.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reKeyed copies batches with every effect id suffixed, so that the same
// calls can be appended again to another run of one database.
func reKeyed(batches [][]events.Record, suffix string) [][]events.Record {
	out := make([][]events.Record, len(batches))
	for i, recs := range batches {
		out[i] = make([]events.Record, len(recs))
		for j, r := range recs {
			switch p := r.Payload.(type) {
			case vocab.CallPrepared:
				p.EffectID += suffix
				r.Payload = p
			case vocab.CallTransition:
				p.EffectID += suffix
				r.Payload = p
			case vocab.CallResult:
				p.EffectID += suffix
				r.Payload = p
			}
			out[i][j] = r
		}
	}
	return out
}

// BenchmarkCallStorage is the storage half of BenchmarkCallEfficiency's c
// with no network: a real 100-call run is recorded once, commit by commit,
// and each op appends the same commits (same records, same batches, with
// projections) to a new run (effect ids re-keyed) of one database: SQLite at
// synchronous=NORMAL, and PostgreSQL.
// It reports µs of storage per call: the lever for c at NORMAL.
func BenchmarkCallStorage(b *testing.B) {
	const calls = 100
	_, url := demotest.StartTest(b, demoserver.Options{})
	ctx := context.Background()
	wf, err := spec.Parse("bench.yaml", []byte(manyCalls(url, calls)))
	if err != nil {
		b.Fatal(err)
	}
	src := openBenchDB(b, events.DurabilityNormal)
	var batches [][]events.Record
	var payloadBytes int
	src.ObserveCommits(func(ci events.CommitInfo) {
		for _, evs := range ci.Appends {
			recs := make([]events.Record, len(evs))
			for i, e := range evs {
				recs[i] = events.Record{Stream: e.Stream, Type: e.Type, Payload: typedPayload(b, e.Type, e.Payload)}
				payloadBytes += len(e.Payload)
			}
			batches = append(batches, recs)
		}
	})
	if res, err := (&workflow.Runner{DB: src}).Run(ctx, wf, nil, workflow.RunOptions{}); err != nil || res.Err != nil {
		b.Fatalf("run: %v %v", err, res.Err)
	}
	src.ObserveCommits(nil)
	// SQLite at NORMAL, and PostgreSQL (AGENTCTL_TEST_POSTGRES; skipped
	// without it outside CI) with synchronous_commit on.
	for _, be := range []struct {
		name string
		open func(b *testing.B) *events.DB
	}{
		{string(events.DurabilityNormal), func(b *testing.B) *events.DB { return openBenchDB(b, events.DurabilityNormal) }},
		{"postgres", func(b *testing.B) *events.DB { return testkit.OpenDB(b, testkit.PostgresDB(b), events.Options{}) }},
	} {
		b.Run(be.name, func(b *testing.B) {
			db := be.open(b)
			var cpu time.Duration
			w0, lsn0 := writtenBytes(b, db)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				run := reKeyed(batches, fmt.Sprintf("-%d", i))
				c0 := processCPU(b)
				b.StartTimer()
				for _, recs := range run {
					if _, err := db.Append(ctx, fmt.Sprintf("run-storage-%d", i), recs, projector.Apply); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu += processCPU(b) - c0
				b.StartTimer()
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N*calls), "cpu-µs/call")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*calls), "µs/call")
			b.ReportMetric(float64(len(batches))/calls, "commits/call")
			// Bytes per call: of the payloads the run recorded, and written
			// to disk (SQLite: by this process, WAL and checkpoints; PostgreSQL:
			// WAL, the whole cluster's, so a busy neighbour adds to it).
			b.ReportMetric(float64(payloadBytes)/calls, "payload-B/call")
			if w1, lsn1 := writtenBytes(b, db); lsn0 != "" {
				var d float64
				if err := db.SQL().Get(&d, `SELECT pg_wal_lsn_diff($1, $2)`, lsn1, lsn0); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(d/float64(b.N*calls), "wal-B/call")
			} else if w0 >= 0 && w1 >= 0 {
				b.ReportMetric(float64(w1-w0)/float64(b.N*calls), "written-B/call")
			}
		})
	}
}

// writtenBytes is what BenchmarkCallStorage's bytes per call are measured
// by: on PostgreSQL the current WAL position (lsn; written -1), else the
// bytes this process has written (/proc/self/io wchar; -1 where there is
// none).
func writtenBytes(b *testing.B, db *events.DB) (written int64, lsn string) {
	if db.SQL().DriverName() == "pgx" {
		if err := db.SQL().Get(&lsn, `SELECT pg_current_wal_lsn()::text`); err != nil {
			b.Fatal(err)
		}
		return -1, lsn
	}
	io, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1, ""
	}
	for _, line := range strings.Split(string(io), "\n") {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err == nil {
				return n, ""
			}
		}
	}
	return -1, ""
}
