package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/otlptest"
	"github.com/agentctl/agentctl/projector/telemetry"
)

// otelEnv points this process's telemetry at rcv (and clears the other
// OTEL_* variables a developer may have set).
func otelEnv(t *testing.T, endpoint string) {
	t.Helper()
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
		"OTEL_METRICS_EXPORTER", "OTEL_EXPORTER_OTLP_HEADERS", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME", "TRACEPARENT", "TRACESTATE"} {
		t.Setenv(k, "")
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
}

// parallelWorkflow is examples/parallel.yaml against url.
func parallelWorkflow(t *testing.T, url string) string {
	t.Helper()
	src, err := os.ReadFile("../../examples/parallel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	wf := filepath.Join(t.TempDir(), "parallel.yaml")
	if err := os.WriteFile(wf, bytes.ReplaceAll(src, []byte("http://127.0.0.1:8765/mcp"), []byte(url)), 0o600); err != nil {
		t.Fatal(err)
	}
	return wf
}

func spanNames(spans []otlptest.Span) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

// TestTelemetry_ParallelExampleTrace runs examples/parallel.yaml with
// OTEL_EXPORTER_OTLP_ENDPOINT set to an OTLP receiver in the test: one
// trace derived from the run id, a run span, a span per task attempt, a
// CLIENT span per MCP request named and attributed per the MCP semantic
// conventions, parents as the log says, the request span ids the server
// was sent in params._meta.traceparent, and both duration histograms.
func TestTelemetry_ParallelExampleTrace(t *testing.T) {
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", parallelWorkflow(t, url), "--input", "query=raft", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	spans := rcv.Spans()
	want := []string{"initialize", "run parallel-demo", "task docs", "task draft", "task draft", "task draft", "task fetch",
		"tools/call get", "tools/call get", "tools/call get", "tools/call get", "tools/call search", "tools/list"}
	if got := spanNames(spans); !slices.Equal(got, want) {
		t.Fatalf("spans %q,\nwant %q", got, want)
	}
	traceID := telemetry.TraceID(runID).String()
	byID := map[string]otlptest.Span{}
	var run otlptest.Span
	for _, s := range spans {
		if s.TraceID != traceID {
			t.Fatalf("span %s in trace %s, want %s", s.Name, s.TraceID, traceID)
		}
		if s.Attrs["agentctl.run.id"] != runID {
			t.Fatalf("span %s: agentctl.run.id %q", s.Name, s.Attrs["agentctl.run.id"])
		}
		if s.Resource["service.name"] != "agentctl" {
			t.Fatalf("resource %v", s.Resource)
		}
		byID[s.SpanID] = s
		if strings.HasPrefix(s.Name, "run ") {
			run = s
		}
	}
	if run.ParentID != "" {
		t.Fatalf("run span has parent %s", run.ParentID)
	}
	// The span ids the server was told are the request spans' ids.
	told := toldSpans(t, db, runID, traceID)
	errs := 0
	for _, s := range spans {
		parent, hasParent := byID[s.ParentID]
		switch {
		case strings.HasPrefix(s.Name, "task "):
			if !hasParent || parent.SpanID != run.SpanID {
				t.Fatalf("%s: parent %s, want the run span", s.Name, s.ParentID)
			}
		case s.Name == "run parallel-demo":
		default: // a request
			if s.Kind.String() != "SPAN_KIND_CLIENT" || !told[s.SpanID] {
				t.Fatalf("%s: kind %s, sent as traceparent %v", s.Name, s.Kind, told[s.SpanID])
			}
			if !hasParent || !strings.HasPrefix(parent.Name, "task ") {
				t.Fatalf("%s: parent %q, want a task span", s.Name, parent.Name)
			}
			for _, k := range []string{"mcp.method.name", "jsonrpc.request.id", "network.transport", "server.address", "server.port", "mcp.protocol.version"} {
				if s.Attrs[k] == "" {
					t.Fatalf("%s: no %s in %v", s.Name, k, s.Attrs)
				}
			}
			if s.Attrs["network.transport"] != "tcp" || s.Attrs["server.address"] != "127.0.0.1" {
				t.Fatalf("%s: %v", s.Name, s.Attrs)
			}
		}
		if strings.HasPrefix(s.Name, "tools/call ") {
			tool := strings.TrimPrefix(s.Name, "tools/call ")
			a := s.Attrs
			if a["gen_ai.tool.name"] != tool || a["gen_ai.operation.name"] != "execute_tool" || a["mcp.protocol.version"] != "2025-11-25" ||
				a["agentctl.idempotency"] != "idempotent" || len(a["agentctl.effect.id"]) != 64 || parent.Attrs["agentctl.task.id"] == "" {
				t.Fatalf("%s: %v", s.Name, a)
			}
			if parent.Attrs["agentctl.task.id"] == "draft" {
				errs++
				if a["error.type"] != "tool_error" || s.Status.String() != "STATUS_CODE_ERROR" || a["agentctl.call.state"] != "failed" {
					t.Fatalf("draft call: %v status %s", a, s.Status)
				}
			} else if a["error.type"] != "" || a["agentctl.call.state"] != "succeeded" {
				t.Fatalf("%s: %v", s.Name, a)
			}
		}
	}
	if errs != 3 {
		t.Fatalf("%d failed draft calls, want 3", errs)
	}
	counts := map[string]uint64{}
	for _, m := range rcv.Metrics() {
		if h := m.GetHistogram(); h != nil {
			for _, dp := range h.DataPoints {
				counts[m.Name] += dp.Count
				if m.Name == telemetry.MetricOperationDuration && !slices.Equal(dp.ExplicitBounds, []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}) ||
					m.Name == telemetry.MetricSessionDuration && !slices.Equal(dp.ExplicitBounds, []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}) {
					t.Fatalf("buckets %v", dp.ExplicitBounds)
				}
			}
		}
	}
	if counts[telemetry.MetricOperationDuration] != 7 || counts[telemetry.MetricSessionDuration] != 1 {
		t.Fatalf("histogram counts %v, want 7 operations and 1 session", counts)
	}
	t.Logf("examples/parallel.yaml: run %s: %d spans in trace %s: %q", runID, len(spans), traceID, spanNames(spans))
}

// toldSpans returns the span ids of the traceparents the run's recorded
// requests carried (params._meta, as sent), failing the test when one
// lacks it or names another trace than traceID.
func toldSpans(t *testing.T, db, runID, traceID string) map[string]bool {
	t.Helper()
	told := map[string]bool{}
	for _, e := range logOf(t, db, runID) {
		if e.Type != "mcp.request" {
			continue
		}
		f, err := vocab.DecodeFrame(e)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		_ = json.Unmarshal(f.Body, &body)
		tp, _ := body.Params.Meta["traceparent"].(string)
		sc, ok := telemetry.ParseTraceparent(tp)
		if !ok || sc.TraceID().String() != traceID {
			t.Fatalf("request %s (seq %d) carries traceparent %q, want one in trace %s", f.Method, e.Seq, tp, traceID)
		}
		told[sc.SpanID().String()] = true
	}
	return told
}
