package main

import (
	"context"
	"fmt"
	"os"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/projector/telemetry"
	"github.com/agentctl/agentctl/workflow"
)

// telemetryState is a command's OpenTelemetry export (docs/TELEMETRY.md):
// one pipeline per command, started by the first runner that needs it and
// flushed before the database closes (withDB).
type telemetryState struct {
	started bool
	p       *telemetry.Pipeline
	db      *events.DB
}

// telemetryConfig reads the OTEL_* variables; nil when telemetry is off.
// A setting agentctl cannot honour is said once on stderr and turns
// telemetry off: it never fails a command.
func (a *app) telemetryConfig() *telemetry.Config {
	cfg, err := telemetry.FromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintf(a.stderr, "telemetry off: %s\n", termtext.Line(err.Error()))
		return nil
	}
	if cfg != nil {
		cfg.ServiceVersion = version
	}
	return cfg
}

// wireTelemetry makes r's committed events feed the command's telemetry
// pipeline and r's requests carry its trace context. With no OTEL_*
// endpoint set it does nothing: r is left as it was.
func (a *app) wireTelemetry(db *events.DB, r *workflow.Runner) {
	a.startTelemetry(db)
	t := a.tel
	if t.p == nil || t.db != db {
		return
	}
	observe := r.Observe
	r.Observe = func(e events.Event) {
		if observe != nil {
			observe(e)
		}
		t.p.Observe(e)
	}
	r.TraceContext = t.p.TraceContext
}

// startTelemetry starts the command's pipeline on db once (not safe for
// concurrent use: the worker calls it before its runs start).
func (a *app) startTelemetry(db *events.DB) {
	if a.tel == nil {
		a.tel = &telemetryState{}
	}
	t := a.tel
	if !t.started {
		t.started = true
		if cfg := a.telemetryConfig(); cfg != nil {
			p, err := telemetry.Start(context.Background(), cfg, db)
			if err != nil {
				fmt.Fprintf(a.stderr, "telemetry off: %s\n", termtext.Line(err.Error()))
			}
			t.p, t.db = p, db
		}
	}
}

// closeTelemetry flushes the command's telemetry, bounded by
// telemetry.DefaultFlushTimeout whatever the collector does.
func (a *app) closeTelemetry() {
	if a.tel == nil || a.tel.p == nil {
		return
	}
	p := a.tel.p
	a.tel.p = nil
	_ = p.Close(context.Background())
	if n := p.Exporter().Dropped(); n > 0 {
		fmt.Fprintf(a.stderr, "telemetry: %d span(s) not exported (the collector failed or was too slow); `agentctl trace export RUN_ID` sends a run's trace again\n", n)
	}
}

// traceParentOpts records the caller's W3C trace context (TRACEPARENT,
// TRACESTATE) in a new run, so that its telemetry is a child of the
// caller's trace; a malformed TRACEPARENT is ignored.
func traceParentOpts(opts *workflow.RunOptions) {
	tp := os.Getenv("TRACEPARENT")
	if _, ok := telemetry.ParseTraceparent(tp); !ok {
		return
	}
	opts.TraceParent, opts.TraceState = tp, os.Getenv("TRACESTATE")
}
