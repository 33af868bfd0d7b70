package telemetry

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// TraceID is the trace of a run that was not started under a caller's
// trace: the first 16 bytes of sha256("agentctl.trace" NUL runID). Any
// process that folds the run's log finds the same one, so a run killed
// and resumed elsewhere continues its trace.
func TraceID(runID string) trace.TraceID {
	var t trace.TraceID
	copy(t[:], digest("agentctl.trace", runID))
	return t
}

// spanID derives a span id from parts (never the zero id).
func spanID(parts ...string) trace.SpanID {
	var s trace.SpanID
	copy(s[:], digest(parts...))
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

func digest(parts ...string) []byte {
	h := sha256.New()
	for i, p := range parts {
		if i > 0 {
			h.Write([]byte{0})
		}
		h.Write([]byte(p))
	}
	return h.Sum(nil)
}

func seqString(seq int64) string { return strconv.FormatInt(seq, 10) }

// ParseTraceparent reads a W3C traceparent header value (version 00, or a
// later version read as 00); ok is false when it is malformed or names
// the invalid trace or span.
func ParseTraceparent(s string) (sc trace.SpanContext, ok bool) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, "-")
	if len(parts) < 4 || len(parts[0]) != 2 || parts[0] == "ff" || len(parts[1]) != 32 || len(parts[2]) != 16 || len(parts[3]) != 2 {
		return sc, false
	}
	if parts[0] == "00" && len(parts) != 4 {
		return sc, false
	}
	tid, err1 := trace.TraceIDFromHex(parts[1])
	sid, err2 := trace.SpanIDFromHex(parts[2])
	flags, err3 := hex.DecodeString(parts[3])
	if err1 != nil || err2 != nil || err3 != nil {
		return sc, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.TraceFlags(flags[0]), Remote: true}), true
}

// traceparent formats a W3C traceparent for span sid of trace tid (sampled).
func traceparent(tid trace.TraceID, sid trace.SpanID) string {
	return "00-" + tid.String() + "-" + sid.String() + "-01"
}

// randomSpanID is the span id of a request about to be sent: the fold reads
// it back from the request's recorded params._meta.traceparent.
func randomSpanID() trace.SpanID {
	var s trace.SpanID
	for !s.IsValid() {
		_, _ = rand.Read(s[:])
	}
	return s
}
