package main

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/otlptest"
	"github.com/agentctl/agentctl/projector/telemetry"
)

// TestTelemetry_KillResumeOneTrace: a run SIGKILLed right after its
// tools/call get request is committed (before it is sent), then resumed by
// another process, is one trace: the trace id derived from the run id, one
// run span (with the resume as an event), the interrupted request ended
// as "interrupted", its redispatch a new span linked to it, and every
// parent in the trace.
func TestTelemetry_KillResumeOneTrace(t *testing.T) {
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	wf := writeWorkflow(t, url)
	killedAt(t, "mcp.request#4", "run", wf, "--db", db, "--output", "json")
	out, stderr, code := cli(t, "resume", "last", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("resume exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	spans := rcv.Spans()
	traceID := telemetry.TraceID(runID).String()
	ids := map[string]otlptest.Span{}
	var runs, gets []otlptest.Span
	for _, s := range spans {
		if s.TraceID != traceID {
			t.Fatalf("span %s in trace %s, want %s", s.Name, s.TraceID, traceID)
		}
		if prev, dup := ids[s.SpanID]; dup {
			// At least once: a process killed between an export and its
			// mark sends the batch again, as the same spans.
			if prev.Name != s.Name || prev.ParentID != s.ParentID || prev.StartNano != s.StartNano {
				t.Fatalf("span id %s names %s and %s", s.SpanID, prev.Name, s.Name)
			}
			continue
		}
		ids[s.SpanID] = s
		switch {
		case strings.HasPrefix(s.Name, "run "):
			runs = append(runs, s)
		case s.Name == "tools/call get":
			gets = append(gets, s)
		}
	}
	if len(runs) != 1 || !slices.Contains(runs[0].Events, "agentctl.run.resumed") || runs[0].Attrs["agentctl.run.state"] != "succeeded" {
		t.Fatalf("run spans %+v, want one, succeeded, with the resume", runs)
	}
	for _, s := range spans {
		if s.ParentID != "" {
			if _, ok := ids[s.ParentID]; !ok {
				t.Fatalf("span %s: parent %s is not in the trace", s.Name, s.ParentID)
			}
		}
	}
	if len(gets) != 2 {
		t.Fatalf("%d tools/call get spans, want the interrupted one and its redispatch", len(gets))
	}
	first, again := gets[0], gets[1]
	if first.Attrs["error.type"] != "interrupted" {
		first, again = again, first
	}
	if first.Attrs["error.type"] != "interrupted" || first.Status.String() != "STATUS_CODE_ERROR" ||
		!slices.Equal(again.Links, []string{first.SpanID}) || again.Attrs["agentctl.redispatch"] != "true" || again.Attrs["agentctl.call.state"] != "succeeded" {
		t.Fatalf("interrupted %+v\nredispatch %+v", first, again)
	}
	// Every request, those the killed process sent included, went out in
	// this trace, with the id of its exported span.
	for id := range toldSpans(t, db, runID, traceID) {
		if s, ok := ids[id]; !ok || s.Kind.String() != "SPAN_KIND_CLIENT" {
			t.Fatalf("a request was sent as span %s, which the trace does not have as a CLIENT span", id)
		}
	}
	if got := spanNames(slices.Collect(maps.Values(ids))); len(got) != 12 {
		// run, 3 tasks, initialize+tools/list twice (the resume opens a new
		// session), search, get twice, analyze
		t.Fatalf("%d spans %q, want 12", len(got), got)
	}
}

// TestTelemetry_ResumeExportsWhatWasNot: the log remembers how far a
// run's telemetry was exported (a settings row, telemetry.exported/RUN):
// a process that folds the rest of the run exports only the spans that
// ended after the mark, so the two processes send each span exactly once.
func TestTelemetry_ResumeExportsWhatWasNot(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db, "--output", "json") // telemetry off
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	edb := openLog(t, db)
	evs, err := edb.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := telemetry.FromEnv(os.Getenv)
	if err != nil || cfg == nil {
		t.Fatalf("config %v: %v", cfg, err)
	}
	cut := len(evs) / 2
	for i, part := range [][]events.Event{evs[:cut], evs[cut:]} {
		p, err := telemetry.Start(context.Background(), cfg, edb)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range part {
			p.Observe(e)
		}
		if err := p.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		mark, err := edb.TelemetryMark(context.Background(), runID)
		if err != nil || mark != part[len(part)-1].Seq {
			t.Fatalf("process %d: mark %d (%v), want %d", i+1, mark, err, part[len(part)-1].Seq)
		}
		if i == 0 && (len(rcv.Spans()) == 0 || len(rcv.Spans()) >= 9) {
			t.Fatalf("first half exported %d spans, want some of the 9", len(rcv.Spans()))
		}
	}
	seen := map[string]bool{}
	for _, s := range rcv.Spans() {
		if seen[s.SpanID] {
			t.Fatalf("span %s exported twice", s.Name)
		}
		seen[s.SpanID] = true
	}
	if len(seen) != 9 {
		t.Fatalf("%d spans, want 9: %q", len(seen), spanNames(rcv.Spans()))
	}
}

// TestTelemetry_CollectorDownIsBounded: a collector that does not answer,
// or refuses every export, costs the run at most the flush bound at exit
// (telemetry.DefaultFlushTimeout, 2 s): the run succeeds, the spans are
// counted as dropped, the mark does not move, and `trace export` sends
// them later.
func TestTelemetry_CollectorDownIsBounded(t *testing.T) {
	for _, mode := range []string{"held", "refused"} {
		t.Run(mode, func(t *testing.T) {
			rcv := otlptest.Start(t)
			otelEnv(t, rcv.Endpoint)
			if mode == "held" {
				rcv.HoldAll()
			} else {
				rcv.Refuse(503)
			}
			_, url := demotest.StartTest(t, demoserver.Options{})
			db := filepath.Join(t.TempDir(), "a.db")
			out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db, "--output", "json")
			returned := time.Now()
			if code != 0 || !strings.Contains(stderr, "telemetry: 9 span(s) not exported") {
				t.Fatalf("run exit %d with the collector %s: %s", code, mode, stderr)
			}
			runID := jsonRunID(t, out)
			evs := logOf(t, db, runID)
			finished, err := time.Parse(time.RFC3339Nano, evs[len(evs)-1].CreatedAt)
			if err != nil || evs[len(evs)-1].Type != vocab.TypeRunFinished {
				t.Fatalf("last event %s: %v", evs[len(evs)-1].Type, err)
			}
			// The bound plus what printing the result may take on a loaded machine.
			if d := returned.Sub(finished); d > telemetry.DefaultFlushTimeout+1500*time.Millisecond {
				t.Fatalf("the command returned %s after run.finished, want at most the %s flush bound", d, telemetry.DefaultFlushTimeout)
			}
			if mark, err := openLog(t, db).TelemetryMark(context.Background(), runID); err != nil || mark != 0 {
				t.Fatalf("mark %d (%v) after a failed export, want 0", mark, err)
			}
			if len(rcv.Spans()) != 0 {
				t.Fatalf("the %s collector kept spans", mode)
			}
			rcv.Release()
			rcv.Refuse(0)
			out, stderr, code = cli(t, "trace", "export", runID, "--db", db, "--output", "json")
			if code != 0 || len(rcv.Spans()) != 9 {
				t.Fatalf("trace export exit %d, %d spans received: %s%s", code, len(rcv.Spans()), out, stderr)
			}
		})
	}
}

// TestTelemetry_DroppedSpansCounted: spans that could not be exported are
// counted (the agentctl.telemetry.spans.dropped counter), and Close returns
// within the flush bound while the collector holds the request.
func TestTelemetry_DroppedSpansCounted(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	rcv.HoldAll()
	cfg, _ := telemetry.FromEnv(os.Getenv)
	edb := openLog(t, db)
	evs, err := edb.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	p, err := telemetry.Start(context.Background(), cfg, edb)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		p.Observe(e)
	}
	<-rcv.Arrived() // the export is held by the collector
	start := time.Now()
	_ = p.Close(context.Background())
	if d := time.Since(start); d > telemetry.DefaultFlushTimeout+time.Second {
		t.Fatalf("Close took %s with the collector holding the export", d)
	}
	if n := p.Exporter().Dropped(); n != 9 {
		t.Fatalf("%d spans counted dropped, want 9", n)
	}
}
