package transport

import (
	"encoding/json"
	"maps"
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
	p := map[string]any{}
	switch v := params.(type) {
	case nil:
	case map[string]any:
		maps.Copy(p, v)
	default:
		b, err := json.Marshal(v)
		if err != nil || json.Unmarshal(b, &p) != nil {
			return params
		}
	}
	meta := map[string]any{}
	if m, ok := p["_meta"].(map[string]any); ok {
		maps.Copy(meta, m)
	}
	meta[MetaTraceparent] = tp
	if ts != "" {
		meta[MetaTracestate] = ts
	}
	p["_meta"] = meta
	x.trace = [2]string{tp, ts}
	return p
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
