package vocab

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/canonjson"
)

// AppendJSON appends the frame as encoding/json (SetEscapeHTML(false))
// would write it, byte for byte, without reflection: every progress frame
// of a live run is encoded on the path between reading it and committing
// it (events.PayloadAppender). TestFrameJSONMatchesEncodingJSON holds it to
// the reference encoder.
func (f Frame) AppendJSON(dst []byte) ([]byte, error) {
	var err error
	dst = append(dst, `{"dir":`...)
	dst = canonjson.AppendString(dst, f.Dir)
	dst = append(dst, `,"kind":`...)
	dst = canonjson.AppendString(dst, f.Kind)
	if f.Method != "" {
		dst = append(dst, `,"method":`...)
		dst = canonjson.AppendString(dst, f.Method)
	}
	if len(f.ID) > 0 {
		dst = append(dst, `,"id":`...)
		if dst, err = appendCompact(dst, f.ID); err != nil {
			return nil, err
		}
	}
	if f.HTTPStatus != 0 {
		dst = append(dst, `,"httpStatus":`...)
		dst = strconv.AppendInt(dst, int64(f.HTTPStatus), 10)
	}
	if f.EventID != "" {
		dst = append(dst, `,"eventId":`...)
		dst = canonjson.AppendString(dst, f.EventID)
	}
	dst = append(dst, `,"remote":`...)
	dst = canonjson.AppendString(dst, f.Remote)
	dst = append(dst, `,"generation":`...)
	dst = strconv.AppendInt(dst, int64(f.Generation), 10)
	if f.TaskID != "" {
		dst = append(dst, `,"taskId":`...)
		dst = canonjson.AppendString(dst, f.TaskID)
	}
	if f.Attempt != 0 {
		dst = append(dst, `,"attempt":`...)
		dst = strconv.AppendInt(dst, int64(f.Attempt), 10)
	}
	if f.EffectID != "" {
		dst = append(dst, `,"effectId":`...)
		dst = canonjson.AppendString(dst, f.EffectID)
	}
	if m := f.Move; m != nil {
		dst = m.appendJSON(append(dst, `,"move":`...))
	}
	dst = append(dst, `,"body":`...)
	if f.Body == nil {
		dst = append(dst, "null"...)
	} else if dst, err = appendCompact(dst, f.Body); err != nil {
		return nil, err
	}
	return append(dst, '}'), nil
}

var _ events.PayloadAppender = Frame{}

// appendJSON appends the move as encoding/json (SetEscapeHTML(false)) writes it.
func (m *Move) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"to":`...)
	dst = canonjson.AppendString(dst, m.To)
	dst = append(dst, `,"trigger":`...)
	dst = canonjson.AppendString(dst, m.Trigger)
	if m.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = canonjson.AppendString(dst, m.Reason)
	}
	dst = append(dst, `,"generation":`...)
	dst = strconv.AppendInt(dst, int64(m.Generation), 10)
	if m.Redispatches != 0 {
		dst = append(dst, `,"redispatches":`...)
		dst = strconv.AppendInt(dst, int64(m.Redispatches), 10)
	}
	return append(dst, '}')
}

// appendCompact appends raw JSON as encoding/json writes a RawMessage:
// compacted, HTML left alone.
func appendCompact(dst, raw []byte) ([]byte, error) {
	buf := bytes.NewBuffer(dst)
	if err := json.Compact(buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
