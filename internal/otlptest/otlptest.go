// Package otlptest is an OTLP collector for tests: an HTTP server on
// 127.0.0.1 (and optionally a gRPC one) that decodes the
// go.opentelemetry.io/proto/otlp export requests agentctl sends and keeps
// the spans and metrics for assertions. It can hold every request until
// released, to stand for a collector that is slow or down.
package otlptest

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	colmetrics "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	metricspb "go.opentelemetry.io/proto/otlp/metrics/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Span is one received span, flattened for assertions.
type Span struct {
	Name, TraceID, SpanID, ParentID string
	Kind                            tracepb.Span_SpanKind
	Attrs                           map[string]string
	Status                          tracepb.Status_StatusCode
	StatusMessage                   string
	Links                           []string // span ids
	Events                          []string
	StartNano, EndNano              uint64
	Resource                        map[string]string
}

// Receiver is a test OTLP collector.
type Receiver struct {
	// Endpoint is the base URL to put in OTEL_EXPORTER_OTLP_ENDPOINT.
	Endpoint string
	// GRPCEndpoint is set by StartGRPC.
	GRPCEndpoint string

	mu       sync.Mutex
	spans    []Span
	metrics  []*metricspb.Metric
	requests int
	raw      [][]byte
	// Hold, when set, makes every export request wait until it is closed.
	hold chan struct{}
	// Status, when set, is answered instead of 200 (a refusing collector).
	status int
	// arrived gets a value for each request that arrived (before Hold).
	arrived chan struct{}
}

// Start starts an HTTP receiver; it stops with the test.
func Start(t testing.TB) *Receiver {
	r := &Receiver{arrived: make(chan struct{}, 1024)}
	srv := httptest.NewServer(http.HandlerFunc(r.serveHTTP))
	t.Cleanup(func() {
		r.Release()
		srv.Close()
	})
	r.Endpoint = srv.URL
	return r
}

// HoldAll makes every later request wait until Release: a collector that
// does not answer.
func (r *Receiver) HoldAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold == nil {
		r.hold = make(chan struct{})
	}
}

// Release lets held requests go on (answered with an error status).
func (r *Receiver) Release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.hold != nil {
		close(r.hold)
		r.hold = nil
	}
}

// Refuse makes every later request be answered with status.
func (r *Receiver) Refuse(status int) {
	r.mu.Lock()
	r.status = status
	r.mu.Unlock()
}

// Arrived is signalled once per request received.
func (r *Receiver) Arrived() <-chan struct{} { return r.arrived }

func (r *Receiver) serveHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	r.mu.Lock()
	hold, status := r.hold, r.status
	r.mu.Unlock()
	if hold != nil {
		select {
		case <-hold:
		case <-req.Context().Done():
		}
		http.Error(w, "released", http.StatusServiceUnavailable)
		return
	}
	if status != 0 {
		http.Error(w, "refused", status)
		return
	}
	switch req.URL.Path {
	case "/v1/traces":
		var m coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.addTraces(&m, body)
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	case "/v1/metrics":
		var m colmetrics.ExportMetricsServiceRequest
		if err := proto.Unmarshal(body, &m); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.addMetrics(&m, body)
		b, _ := proto.Marshal(&colmetrics.ExportMetricsServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(b)
	default:
		http.NotFound(w, req)
	}
}

func (r *Receiver) addTraces(m *coltrace.ExportTraceServiceRequest, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.raw = append(r.raw, raw)
	for _, rs := range m.ResourceSpans {
		res := attrs(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{Name: s.Name, TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId),
					ParentID: hex.EncodeToString(s.ParentSpanId), Kind: s.Kind, Attrs: attrs(s.Attributes),
					Status: s.GetStatus().GetCode(), StatusMessage: s.GetStatus().GetMessage(), StartNano: s.StartTimeUnixNano, EndNano: s.EndTimeUnixNano, Resource: res}
				for _, l := range s.Links {
					sp.Links = append(sp.Links, hex.EncodeToString(l.SpanId))
				}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, e.Name)
				}
				r.spans = append(r.spans, sp)
			}
		}
	}
}

func (r *Receiver) addMetrics(m *colmetrics.ExportMetricsServiceRequest, raw []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.raw = append(r.raw, raw)
	for _, rm := range m.ResourceMetrics {
		for _, sm := range rm.ScopeMetrics {
			r.metrics = append(r.metrics, sm.Metrics...)
		}
	}
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Metrics returns every metric received so far.
func (r *Receiver) Metrics() []*metricspb.Metric {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*metricspb.Metric(nil), r.metrics...)
}

// Raw returns the bytes of every export request received (protobuf).
func (r *Receiver) Raw() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.raw...)
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		v := kv.GetValue()
		switch x := v.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = x.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = itoa(x.IntValue)
		case *commonpb.AnyValue_BoolValue:
			if x.BoolValue {
				m[kv.Key] = "true"
			} else {
				m[kv.Key] = "false"
			}
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// StartGRPC also serves OTLP over gRPC on 127.0.0.1 (GRPCEndpoint).
func (r *Receiver) StartGRPC(t testing.TB) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	coltrace.RegisterTraceServiceServer(s, traceService{r: r})
	colmetrics.RegisterMetricsServiceServer(s, metricsService{r: r})
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	r.GRPCEndpoint = "http://" + l.Addr().String()
}

type traceService struct {
	coltrace.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, m *coltrace.ExportTraceServiceRequest) (*coltrace.ExportTraceServiceResponse, error) {
	raw, _ := proto.Marshal(m)
	s.r.addTraces(m, raw)
	return &coltrace.ExportTraceServiceResponse{}, nil
}

type metricsService struct {
	colmetrics.UnimplementedMetricsServiceServer
	r *Receiver
}

func (s metricsService) Export(_ context.Context, m *colmetrics.ExportMetricsServiceRequest) (*colmetrics.ExportMetricsServiceResponse, error) {
	raw, _ := proto.Marshal(m)
	s.r.addMetrics(m, raw)
	return &colmetrics.ExportMetricsServiceResponse{}, nil
}
