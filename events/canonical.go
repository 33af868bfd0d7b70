package events

import (
	"strconv"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// canonical is the JSON array [runID, seq, stream, type, payload] exactly as
// encoding/json (SetEscapeHTML(false), no trailing newline) writes it: the
// version-1 chain hashes these bytes, so they may never change. It is
// written by hand because it runs for every event appended and every event
// verified; TestCanonicalMatchesEncodingJSON holds it to the reference
// encoder.
func canonical(runID string, seq int64, stream, typ, payload string) []byte {
	return append(canonicalPrefix(runID, seq, stream, typ, payload, 0), ']')
}

// canonicalV2 is the array [runID, seq, stream, type, payload, createdAt],
// encoded the same way: what the version-2 chain hashes.
func canonicalV2(runID string, seq int64, stream, typ, payload, createdAt string) []byte {
	b := make([]byte, 0, len(runID)+len(stream)+len(typ)+len(payload)+len(payload)/8+len(createdAt)+56)
	return appendCanonicalV2(b, runID, seq, stream, typ, payload, createdAt)
}

// appendCanonicalV2 appends canonicalV2's bytes to b.
func appendCanonicalV2(b []byte, runID string, seq int64, stream, typ, payload, createdAt string) []byte {
	b = appendCanonicalPrefix(b, runID, seq, stream, typ, payload)
	b = append(b, ',')
	b = canonjson.AppendString(b, createdAt)
	return append(b, ']')
}

// canonicalPrefix is the array up to the payload, unclosed; extra is room
// for what the caller appends.
func canonicalPrefix(runID string, seq int64, stream, typ, payload string, extra int) []byte {
	b := make([]byte, 0, len(runID)+len(stream)+len(typ)+len(payload)+len(payload)/8+48+extra)
	return appendCanonicalPrefix(b, runID, seq, stream, typ, payload)
}

// appendCanonicalPrefix appends canonicalPrefix's bytes to b.
func appendCanonicalPrefix(b []byte, runID string, seq int64, stream, typ, payload string) []byte {
	b = append(b, '[')
	b = canonjson.AppendString(b, runID)
	b = append(b, ',')
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, ',')
	b = canonjson.AppendString(b, stream)
	b = append(b, ',')
	b = canonjson.AppendString(b, typ)
	b = append(b, ',')
	return canonjson.AppendString(b, payload)
}
