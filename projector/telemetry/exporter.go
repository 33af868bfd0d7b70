package telemetry

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Metric names (MCP semantic conventions) and agentctl's own.
const (
	MetricOperationDuration = "mcp.client.operation.duration"
	MetricSessionDuration   = "mcp.client.session.duration"
	MetricSpansDropped      = "agentctl.telemetry.spans.dropped"
	scopeName               = "github.com/agentctl/agentctl/projector/telemetry"
)

// The MCP conventions' explicit bucket boundaries, in seconds
// (semantic-conventions docs/gen-ai/mcp.md): operationBuckets for
// mcp.client.operation.duration, sessionBuckets for
// mcp.client.session.duration.
var (
	operationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10}
	sessionBuckets   = []float64{0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300}
)

// Exporter sends folded spans and metric points over OTLP.
type Exporter struct {
	cfg      Config
	spans    sdktrace.SpanExporter // nil: traces off
	meters   *sdkmetric.MeterProvider
	opHist   metric.Float64Histogram
	sessHist metric.Float64Histogram
	dropCtr  metric.Int64Counter
	res      *resource.Resource
	scope    instrumentation.Scope

	dropped  atomic.Int64
	exported atomic.Int64
}

// NewExporter builds the OTLP exporters cfg names. It does no network I/O:
// a collector that is down shows at the first export.
func NewExporter(ctx context.Context, cfg Config) (*Exporter, error) {
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "agentctl"), attribute.String("service.version", cfg.ServiceVersion)),
		resource.WithTelemetrySDK(), resource.WithFromEnv())
	if err != nil && res == nil {
		return nil, fmt.Errorf("telemetry resource (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES): %w", err)
	}
	x := &Exporter{cfg: cfg, res: res, scope: instrumentation.Scope{Name: scopeName, Version: cfg.ServiceVersion}}
	if cfg.Traces {
		if cfg.TracesProtocol == "grpc" {
			x.spans, err = otlptracegrpc.New(ctx)
		} else {
			x.spans, err = otlptracehttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP trace exporter (%s): %w", cfg.TracesProtocol, err)
		}
	}
	if cfg.Metrics {
		var me sdkmetric.Exporter
		if cfg.MetricsProtocol == "grpc" {
			me, err = otlpmetricgrpc.New(ctx)
		} else {
			me, err = otlpmetrichttp.New(ctx)
		}
		if err != nil {
			return nil, fmt.Errorf("OTLP metric exporter (%s): %w", cfg.MetricsProtocol, err)
		}
		x.meters = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(sdkmetric.NewPeriodicReader(me)))
	}
	var mp metric.MeterProvider = noop.NewMeterProvider()
	if x.meters != nil {
		mp = x.meters
	}
	m := mp.Meter(scopeName)
	if x.opHist, err = m.Float64Histogram(MetricOperationDuration, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(operationBuckets...),
		metric.WithDescription("The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received.")); err != nil {
		return nil, err
	}
	if x.sessHist, err = m.Float64Histogram(MetricSessionDuration, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(sessionBuckets...),
		metric.WithDescription("The duration of the MCP session as observed on the MCP client.")); err != nil {
		return nil, err
	}
	if x.dropCtr, err = m.Int64Counter(MetricSpansDropped, metric.WithUnit("{span}"),
		metric.WithDescription("Spans agentctl folded from the log but could not export (queue full, or the collector failed or was too slow).")); err != nil {
		return nil, err
	}
	return x, nil
}

// Dropped is how many spans were dropped so far.
func (x *Exporter) Dropped() int64 { return x.dropped.Load() }

// Exported is how many spans the collector accepted so far.
func (x *Exporter) Exported() int64 { return x.exported.Load() }

func (x *Exporter) drop(n int) {
	if n <= 0 {
		return
	}
	x.dropped.Add(int64(n))
	x.dropCtr.Add(context.Background(), int64(n))
}

// measure records one metric point.
func (x *Exporter) measure(p point) {
	h := x.opHist
	if p.session {
		h = x.sessHist
	}
	h.Record(context.Background(), p.seconds, metric.WithAttributes(p.attrs...))
}

// export sends spans; on failure they count as dropped.
func (x *Exporter) export(ctx context.Context, spans []*span) error {
	if len(spans) == 0 || x.spans == nil {
		return nil
	}
	ro := make([]sdktrace.ReadOnlySpan, len(spans))
	for i, sp := range spans {
		ro[i] = x.stub(sp).Snapshot()
	}
	if err := x.spans.ExportSpans(ctx, ro); err != nil {
		x.drop(len(spans))
		return err
	}
	x.exported.Add(int64(len(spans)))
	return nil
}

func (x *Exporter) stub(sp *span) tracetest.SpanStub {
	flags := trace.FlagsSampled
	st := tracetest.SpanStub{
		Name:        sp.name,
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: sp.trace, SpanID: sp.id, TraceFlags: flags, TraceState: sp.traceState}),
		SpanKind:    sp.kind, StartTime: sp.start, EndTime: sp.end, Attributes: sp.attrs,
		Status:   sdktrace.Status{Code: sp.status, Description: sp.statusMessage},
		Resource: x.res, InstrumentationScope: x.scope,
	}
	if sp.parent.IsValid() {
		st.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: sp.trace, SpanID: sp.parent, TraceFlags: flags, Remote: sp.remoteParent})
	}
	for _, l := range sp.links {
		st.Links = append(st.Links, sdktrace.Link{SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: sp.trace, SpanID: l, TraceFlags: flags}),
			Attributes: []attribute.KeyValue{attribute.String("agentctl.link", "first_request")}})
	}
	for _, e := range sp.events {
		st.Events = append(st.Events, sdktrace.Event{Name: e.name, Time: e.at})
	}
	return st
}

// Shutdown flushes the metrics and closes the exporters within ctx.
func (x *Exporter) Shutdown(ctx context.Context) error {
	var errs []error
	if x.meters != nil {
		errs = append(errs, x.meters.Shutdown(ctx))
	}
	if x.spans != nil {
		errs = append(errs, x.spans.Shutdown(ctx))
	}
	return errors.Join(errs...)
}
