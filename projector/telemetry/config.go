package telemetry

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// DefaultFlushTimeout bounds what telemetry may cost a command at its
// end: the last export of spans and metrics, whatever the collector does.
const DefaultFlushTimeout = 2 * time.Second

// Config is telemetry as the standard OTEL_* environment variables set it
// up. The OTLP exporters read the rest themselves (endpoints, headers,
// timeout, compression, certificates).
type Config struct {
	Traces, Metrics bool
	// TracesProtocol and MetricsProtocol: "http/protobuf" or "grpc".
	TracesProtocol, MetricsProtocol string
	// MaxQueue bounds the spans waiting for export (OTEL_BSP_MAX_QUEUE_SIZE,
	// default 2048): beyond it spans are dropped and counted.
	MaxQueue int
	// FlushTimeout bounds the flush at exit (DefaultFlushTimeout).
	FlushTimeout time.Duration
	// ServiceVersion is the service.version resource attribute.
	ServiceVersion string
	// Getenv is the environment (nil: none set).
	Getenv func(string) string
}

// FromEnv reads the OTEL_* variables through getenv. It returns nil when
// telemetry is off: no OTLP endpoint set, OTEL_SDK_DISABLED=true, or both
// OTEL_TRACES_EXPORTER and OTEL_METRICS_EXPORTER set to none. A protocol
// it cannot speak is an error naming the variable and its value.
func FromEnv(getenv func(string) string) (*Config, error) {
	if getenv == nil || strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return nil, nil
	}
	base := getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != ""
	c := &Config{
		Traces:       (base || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "") && !isNone(getenv("OTEL_TRACES_EXPORTER")),
		Metrics:      (base || getenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT") != "") && !isNone(getenv("OTEL_METRICS_EXPORTER")),
		MaxQueue:     2048,
		FlushTimeout: DefaultFlushTimeout,
		Getenv:       getenv,
	}
	if !c.Traces && !c.Metrics {
		return nil, nil
	}
	var err error
	if c.TracesProtocol, err = protocol(getenv, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"); err != nil {
		return nil, err
	}
	if c.MetricsProtocol, err = protocol(getenv, "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL"); err != nil {
		return nil, err
	}
	if v := getenv("OTEL_BSP_MAX_QUEUE_SIZE"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("OTEL_BSP_MAX_QUEUE_SIZE=%q: want a positive integer", v)
		}
		c.MaxQueue = n
	}
	return c, nil
}

func isNone(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "none") }

// protocol reads the signal's protocol variable, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf.
func protocol(getenv func(string) string, name string) (string, error) {
	v := getenv(name)
	if v == "" {
		name, v = "OTEL_EXPORTER_OTLP_PROTOCOL", getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch strings.TrimSpace(v) {
	case "", "http/protobuf":
		return "http/protobuf", nil
	case "grpc":
		return "grpc", nil
	}
	return "", fmt.Errorf("%s=%q: agentctl exports OTLP as http/protobuf or grpc", name, v)
}
