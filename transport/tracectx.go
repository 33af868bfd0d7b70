package transport

import (
	"net/http"
)

// W3C Trace Context keys, in params._meta (unprefixed, as the 2026-07-28
// revision makes normative; harmless on 2025-11-25) and as HTTP headers.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

// withTrace returns params (a map, a struct or nil) with the request's
// trace context added to _meta, and keeps it for the HTTP headers. The
// caller's params are not modified; params that are not a JSON object are
// returned as they are.
func (x *exchange) withTrace(params any) any {
	tp, ts := x.s.c.cfg.TraceContext()
	if tp == "" {
		return params
	}
	add := map[string]any{MetaTraceparent: tp}
	if ts != "" {
		add[MetaTracestate] = ts
	}
	out := addMeta(params, add)
	if _, ok := out.(map[string]any); ok {
		x.trace = [2]string{tp, ts}
	}
	return out
}

// setTraceHeaders sets the W3C traceparent and tracestate headers of an
// HTTP request that carries a trace context.
func (x *exchange) setTraceHeaders(h http.Header) {
	if x.trace[0] == "" {
		return
	}
	h.Set(MetaTraceparent, x.trace[0])
	if x.trace[1] != "" {
		h.Set(MetaTracestate, x.trace[1])
	}
}
