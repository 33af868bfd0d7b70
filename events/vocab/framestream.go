package vocab

import (
	"strings"

	"github.com/agentctl/agentctl/events"
)

// A frame on its call's stream ("call/" + effect id) is written without
// its effectId, which the stream already says (StoredFrame), and the frame
// decoders (DecodeFrame, DecodeFrameHeader, hence Decode[Frame] and
// Payload) give it back from the stream: every reader sees the effect id
// as before. Frames of logs written before carry it and read as written.

// callStream is the prefix of a call's stream.
const callStream = "call/"

// StoredFrame returns f as the log keeps it on stream: without its
// EffectID when stream is that call's.
func StoredFrame(stream string, f Frame) Frame {
	if f.EffectID != "" && strings.TrimPrefix(stream, callStream) == f.EffectID && strings.HasPrefix(stream, callStream) {
		f.EffectID = ""
	}
	return f
}

// streamEffect gives a frame of e written without its effectId the one
// e's stream names.
func streamEffect(e events.Event, f Frame) Frame {
	if id, ok := strings.CutPrefix(e.Stream, callStream); ok && f.EffectID == "" {
		f.EffectID = id
	}
	return f
}
