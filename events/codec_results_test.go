package events_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// TestCodec_ResultsAreSealed (issue 13 item 8): task.finished and
// run.finished carry tool output and workflow outputs, so they are sealed
// like call.result; a result the previous binary wrote in clear (chain v1)
// still reads, a clear one in chain v2 fails closed.
func TestCodec_ResultsAreSealed(t *testing.T) {
	path, _ := encryptedDB(t)
	db := mustOpen(t, path)
	ctx := context.Background()
	rec := []events.Record{
		{Stream: "run", Type: "run.created", Payload: map[string]string{"digest": "d"}},
		{Stream: "task/t/1", Type: "task.finished", Payload: map[string]string{"output": "tool-output-canary"}},
		{Stream: "run", Type: "run.finished", Payload: map[string]any{"outputs": map[string]string{"r": "tool-output-canary"}}},
	}
	if _, err := db.Append(ctx, "run-res", rec, nil); err != nil {
		t.Fatal(err)
	}
	var clear int
	if err := db.SQL().Get(&clear, `SELECT COUNT(*) FROM events WHERE payload LIKE '%tool-output-canary%'`); err != nil || clear != 0 {
		t.Fatalf("results stored in clear: %d rows (%v)", clear, err)
	}
	var got map[string]string
	evs, err := db.Events(ctx, "run-res")
	if err != nil {
		t.Fatal(err)
	}
	if err := evs[1].Decode(&got); err != nil || got["output"] != "tool-output-canary" {
		t.Fatalf("decode sealed task.finished: %v, %v", got, err)
	}
	var scanned int
	if err := db.ScanPayloads(ctx, "run-res", func(e events.Event) error {
		if e.Type == "run.finished" {
			p, err := e.Plaintext()
			if err != nil || !strings.Contains(p, "tool-output-canary") {
				t.Fatalf("ScanPayloads run.finished: %q, %v", p, err)
			}
			scanned++
		}
		return nil
	}); err != nil || scanned != 1 {
		t.Fatalf("scan: %d, %v", scanned, err)
	}

	// Written in clear by the binary before (v1 hashes): read as written.
	// In clear with a v2 hash: this binary never writes that; fail closed.
	for _, tc := range []struct {
		version int
		wantErr error
	}{{events.ChainV1, nil}, {events.ChainV2, events.ErrMixedPayload}} {
		run := "run-clear-v" + string(rune('0'+tc.version))
		prev := ""
		for i, r := range []struct{ typ, payload string }{{"run.created", `{"digest":"d"}`}, {"task.finished", `{"output":"x"}`}} {
			e := events.Event{RunID: run, Seq: int64(i + 1), Stream: "s", Type: r.typ, Payload: r.payload, CreatedAt: "2025-01-01T00:00:00Z", PrevHash: prev}
			e.Hash = events.ChainHash(tc.version, e)
			if _, err := db.SQL().Exec(`INSERT INTO events (run_id, seq, stream, type, payload, created_at, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, e.RunID, e.Seq, e.Stream, e.Type, e.Payload, e.CreatedAt, e.PrevHash, e.Hash); err != nil {
				t.Fatal(err)
			}
			prev = e.Hash
		}
		evs, err := db.Events(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		var p map[string]string
		if err := evs[1].Decode(&p); !errors.Is(err, tc.wantErr) {
			t.Fatalf("clear task.finished under chain v%d: %v, want %v", tc.version, err, tc.wantErr)
		}
	}
}
