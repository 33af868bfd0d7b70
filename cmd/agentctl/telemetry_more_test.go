package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/otlptest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector/telemetry"
	"github.com/agentctl/agentctl/workflow"
)

// TestTelemetry_NoSecretsNoPayloads: a run with a secret header and an
// argument (echoed in the result) holding canaries exports spans and
// metrics in which neither canary appears, nor the session digest.
func TestTelemetry_NoSecretsNoPayloads(t *testing.T) {
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	const secret, arg = "sekrit-canary-5b1e9d0c2f", "argument-canary-77aa31"
	t.Setenv("MCP_TOKEN", secret)
	_, url := demotest.StartTest(t, demoserver.Options{})
	src, err := os.ReadFile(writeWorkflow(t, url))
	if err != nil {
		t.Fatal(err)
	}
	src = bytes.Replace(src, []byte("    networkAllowlist: [127.0.0.1]\n"), []byte("    networkAllowlist: [127.0.0.1]\n    environmentAllowlist: [MCP_TOKEN]\n"), 1)
	src = bytes.Replace(src, []byte("      timeoutSeconds: 30\n"), []byte("      timeoutSeconds: 30\n      headers:\n        authorization: { env: MCP_TOKEN }\n"), 1)
	wf := filepath.Join(t.TempDir(), "secret.yaml")
	if err := os.WriteFile(wf, src, 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", wf, "--input", "query="+arg, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	var digests []string
	inLog := false
	for _, e := range logOf(t, db, jsonRunID(t, out)) {
		inLog = inLog || strings.Contains(e.Payload, arg)
		if i := strings.Index(e.Payload, `"sessionIdDigest":"sha256:`); i >= 0 {
			digests = append(digests, e.Payload[i+27:i+27+64])
		}
	}
	raw := rcv.Raw()
	if len(rcv.Spans()) != 9 || len(digests) == 0 || !inLog {
		t.Fatalf("%d spans, %d session digests, argument canary in the log: %v", len(rcv.Spans()), len(digests), inLog)
	}
	for _, b := range raw {
		for _, c := range append([]string{secret, arg}, digests...) {
			if bytes.Contains(b, []byte(c)) {
				t.Fatalf("an export request holds %q", c)
			}
		}
	}
}

// TestTelemetry_TraceparentMakesAChild: TRACEPARENT (and TRACESTATE)
// make the run's span a child of the caller's span, in the caller's
// trace, for every span and every request's traceparent; the context is
// recorded in run.created.
func TestTelemetry_TraceparentMakesAChild(t *testing.T) {
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	const tid, parent = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	t.Setenv("TRACEPARENT", "00-"+tid+"-"+parent+"-01")
	t.Setenv("TRACESTATE", "ci=42")
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	evs := logOf(t, db, jsonRunID(t, out))
	if !strings.Contains(evs[0].Payload, `"traceParent":"00-`+tid) {
		t.Fatalf("run.created does not record the caller's trace: %s", evs[0].Payload)
	}
	requests := 0
	for _, e := range evs {
		if e.Type == "mcp.request" {
			requests++
			if !strings.Contains(e.Payload, `"traceparent":"00-`+tid+"-") || !strings.Contains(e.Payload, `"tracestate":"ci=42"`) {
				t.Fatalf("request not in the caller's trace: %s", e.Payload)
			}
		}
	}
	roots := 0
	for _, s := range rcv.Spans() {
		if s.TraceID != tid {
			t.Fatalf("span %s in trace %s, want the caller's %s", s.Name, s.TraceID, tid)
		}
		if strings.HasPrefix(s.Name, "run ") {
			roots++
			if s.ParentID != parent {
				t.Fatalf("run span's parent %s, want the caller's %s", s.ParentID, parent)
			}
		}
	}
	if roots != 1 || requests != 5 {
		t.Fatalf("%d run spans, %d requests", roots, requests)
	}
}

// TestTelemetry_TraceExportAfterTheFact: `trace export` sends a recorded
// run's trace: the same spans (ids, names, parents) the live run
// exported, since both are folded from the log; a run recorded with
// telemetry off exports too, with no network I/O other than the export.
func TestTelemetry_TraceExportAfterTheFact(t *testing.T) {
	live := otlptest.Start(t)
	otelEnv(t, live.Endpoint)
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	later := otlptest.Start(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", later.Endpoint)
	out, stderr, code = cli(t, "trace", "export", runID, "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, `"spans": 9`) || !strings.Contains(out, telemetry.TraceID(runID).String()) {
		t.Fatalf("trace export exit %d: %s%s", code, out, stderr)
	}
	key := func(spans []otlptest.Span) []string {
		var ks []string
		for _, s := range spans {
			ks = append(ks, s.Name+"/"+s.SpanID+"/"+s.ParentID+"/"+s.Attrs["error.type"])
		}
		slices.Sort(ks)
		return ks
	}
	if a, b := key(live.Spans()), key(later.Spans()); !slices.Equal(a, b) {
		t.Fatalf("live run exported\n%q\ntrace export sent\n%q", a, b)
	}
	// Unset: no collector, a usage error.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	if _, stderr, code := cli(t, "trace", "export", runID, "--db", db); code != 2 || !strings.Contains(stderr, "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Fatalf("trace export with no endpoint: exit %d: %s", code, stderr)
	}
}

// TestTelemetry_GRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports over gRPC.
func TestTelemetry_GRPC(t *testing.T) {
	rcv := otlptest.Start(t)
	rcv.StartGRPC(t)
	otelEnv(t, rcv.GRPCEndpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	_, url := demotest.StartTest(t, demoserver.Options{})
	out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", filepath.Join(t.TempDir(), "a.db"), "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	if n := len(rcv.Spans()); n != 9 {
		t.Fatalf("%d spans over gRPC, want 9", n)
	}
	found := false
	for _, m := range rcv.Metrics() {
		found = found || m.Name == telemetry.MetricOperationDuration
	}
	if !found || !strings.Contains(out, `"succeeded"`) {
		t.Fatalf("no %s over gRPC", telemetry.MetricOperationDuration)
	}
}

// TestTelemetry_OffCostsNothing: with no OTEL_* endpoint, telemetry is
// off and costs nothing: no pipeline, a runner left as it was (no
// observer, no trace context: the run loop skips both), and a nil
// pipeline's Observe allocates nothing.
func TestTelemetry_OffCostsNothing(t *testing.T) {
	otelEnv(t, "")
	if cfg, err := telemetry.FromEnv(os.Getenv); cfg != nil || err != nil {
		t.Fatalf("config %+v, %v with no endpoint", cfg, err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if cfg, _ := telemetry.FromEnv(os.Getenv); cfg != nil {
		t.Fatal("OTEL_SDK_DISABLED=true left telemetry on")
	}
	otelEnv(t, "")
	a := &app{stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}, output: "json"}
	db := openLog(t, filepath.Join(t.TempDir(), "a.db"))
	r := &workflow.Runner{}
	a.wireTelemetry(db, r)
	if r.Observe != nil || r.TraceContext != nil || a.tel.p != nil {
		t.Fatal("telemetry off still wired an observer or a trace context")
	}
	var p *telemetry.Pipeline
	e := events.Event{RunID: "run-x", Seq: 1, Type: "run.created"}
	if n := testing.AllocsPerRun(1000, func() { p.Observe(e) }); n != 0 {
		t.Fatalf("a nil pipeline's Observe allocates %v times", n)
	}
}

// TestTelemetry_StdioIsPipe: a stdio server's request spans say
// network.transport=pipe and name no server address; the trace context
// goes in params._meta (there are no headers).
func TestTelemetry_StdioIsPipe(t *testing.T) {
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	wf := stdioWorkflow(t, "demo", filepath.Join(dir, "starts"), "echo", "idempotent", "")
	out, stderr, code := cli(t, "run", wf, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	told := toldSpans(t, db, runID, telemetry.TraceID(runID).String())
	calls := 0
	for _, s := range rcv.Spans() {
		if s.Kind.String() != "SPAN_KIND_CLIENT" {
			continue
		}
		if s.Attrs["network.transport"] != "pipe" || s.Attrs["server.address"] != "" || !told[s.SpanID] {
			t.Fatalf("%s: %v (told the server: %v)", s.Name, s.Attrs, told[s.SpanID])
		}
		if s.Name == "tools/call echo" {
			calls++
		}
	}
	if calls != 2 {
		t.Fatalf("%d tools/call echo spans, want 2: %q", calls, spanNames(rcv.Spans()))
	}
}

// TestTelemetry_ServerDown: a request that never got an answer because
// the server refused the connection ends with the task attempt's error
// kind as error.type (not "interrupted"), status ERROR, and the run span
// says how the run ended.
func TestTelemetry_ServerDown(t *testing.T) {
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	db := filepath.Join(t.TempDir(), "a.db")
	_, _, code := cli(t, "run", writeWorkflow(t, "http://127.0.0.1:1/mcp"), "--db", db, "--output", "json")
	if code == 0 {
		t.Fatal("a run against a closed port succeeded")
	}
	var init, run otlptest.Span
	for _, s := range rcv.Spans() {
		switch {
		case s.Name == "initialize":
			init = s
		case strings.HasPrefix(s.Name, "run "):
			run = s
		}
	}
	if e := init.Attrs["error.type"]; e == "" || e == "interrupted" || init.Status.String() != "STATUS_CODE_ERROR" {
		t.Fatalf("initialize span %+v", init)
	}
	if run.Status.String() != "STATUS_CODE_ERROR" || run.Attrs["agentctl.run.state"] != "failed" || run.StatusMessage == "" {
		t.Fatalf("run span %+v", run)
	}
}

// TestTelemetry_WorkerRunsSubmitted: a run submitted under TRACEPARENT
// and executed by a worker is exported by the worker, in the caller's
// trace, on SQLite and PostgreSQL (where the worker records its mark).
func TestTelemetry_WorkerRunsSubmitted(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) { testTelemetryWorker(t, b.DSN(t)) })
}

func testTelemetryWorker(t *testing.T, db string) {
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	const tid = "5b8efff798038103d269b633813fc60c"
	t.Setenv("TRACEPARENT", "00-"+tid+"-eee19b7ec3c1b174-01")
	_, url := demotest.StartTest(t, demoserver.Options{})
	if _, stderr, code := cli(t, "submit", writeWorkflow(t, url), "--db", db); code != 0 {
		t.Fatalf("submit: %s", stderr)
	}
	t.Setenv("TRACEPARENT", "")
	if _, stderr, code := cli(t, "worker", "--drain", "--db", db); code != 0 {
		t.Fatalf("worker: %s", stderr)
	}
	spans := rcv.Spans()
	if len(spans) != 9 {
		t.Fatalf("%d spans from the worker, want 9: %q", len(spans), spanNames(spans))
	}
	for _, s := range spans {
		if s.TraceID != tid {
			t.Fatalf("span %s in trace %s, want the submitter's %s", s.Name, s.TraceID, tid)
		}
	}
	runID := spans[0].Attrs["agentctl.run.id"]
	evs := logOf(t, db, runID)
	if mark, err := openLog(t, db).TelemetryMark(context.Background(), runID); err != nil || mark != evs[len(evs)-1].Seq {
		t.Fatalf("mark %d (%v), want %d", mark, err, evs[len(evs)-1].Seq)
	}
}

// TestTelemetry_EncryptedDatabase: with payloads sealed, the fold opens
// them with the database's key: the same spans, the request span ids read
// back from the sealed request frames, and `trace export` agrees.
func TestTelemetry_EncryptedDatabase(t *testing.T) {
	db := filepath.Join(t.TempDir(), "a.db")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	rcv := otlptest.Start(t)
	otelEnv(t, rcv.Endpoint)
	_, url := demotest.StartTest(t, demoserver.Options{})
	out, stderr, code := cli(t, "run", writeWorkflow(t, url), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	runID := jsonRunID(t, out)
	for _, e := range logOf(t, db, runID) {
		if e.Type == "mcp.request" && !e.Sealed() {
			t.Fatalf("request frame in clear: the test proves nothing: %s", e.Payload)
		}
	}
	told := toldSpans(t, db, runID, telemetry.TraceID(runID).String())
	clients := 0
	for _, s := range rcv.Spans() {
		if s.Kind.String() == "SPAN_KIND_CLIENT" {
			clients++
			if !told[s.SpanID] || s.Attrs["mcp.protocol.version"] == "" {
				t.Fatalf("%s: %v", s.Name, s.Attrs)
			}
		}
	}
	if len(rcv.Spans()) != 9 || clients != 5 {
		t.Fatalf("%d spans (%d client): %q", len(rcv.Spans()), clients, spanNames(rcv.Spans()))
	}
}
