package events

import (
	"strconv"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// canonical is the JSON array [runID, seq, stream, type, payload] exactly as
// encoding/json (SetEscapeHTML(false), no trailing newline) writes it: the
// chain hashes these bytes, so they may never change. It is written by hand
// because it runs for every event appended and every event verified;
// TestCanonicalMatchesEncodingJSON holds it to the reference encoder.
func canonical(runID string, seq int64, stream, typ, payload string) []byte {
	b := make([]byte, 0, len(runID)+len(stream)+len(typ)+len(payload)+len(payload)/8+48)
	b = append(b, '[')
	b = canonjson.AppendString(b, runID)
	b = append(b, ',')
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, ',')
	b = canonjson.AppendString(b, stream)
	b = append(b, ',')
	b = canonjson.AppendString(b, typ)
	b = append(b, ',')
	b = canonjson.AppendString(b, payload)
	return append(b, ']')
}
