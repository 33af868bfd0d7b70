package vocab

import (
	"encoding/json"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// benchFrame is a progress frame as a live run writes it.
func benchFrame(b *testing.B) events.Event {
	p, err := Frame{Dir: "in", Kind: "notification", Method: "notifications/progress", HTTPStatus: 200, EventID: "ev-17",
		Remote: "local", Generation: 1, TaskID: "fetch", Attempt: 1, EffectID: "0f3a9c2e7b1d4c5a",
		Body: json.RawMessage(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"agentctl-2","progress":17,"total":100,"message":"step 17 of 100"}}`)}.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	return events.Event{Type: FramePrefix + "notification", Payload: string(p)}
}

// BenchmarkDecodeFrame is the frame decode replay does for every frame.
func BenchmarkDecodeFrame(b *testing.B) {
	e := benchFrame(b)
	b.SetBytes(int64(len(e.Payload)))
	for b.Loop() {
		if _, err := DecodeFrame(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFrameHeader is the header-only decode of frame routing.
func BenchmarkDecodeFrameHeader(b *testing.B) {
	e := benchFrame(b)
	for b.Loop() {
		if _, err := DecodeFrameHeader(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFrameKey is the projection's read of a frame's task and attempt.
func BenchmarkDecodeFrameKey(b *testing.B) {
	e := benchFrame(b)
	for b.Loop() {
		if _, err := DecodeFrameKey(e); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeFrameMove is the projection's read of a call's request
// frame, which carries the move it makes (FrameMove, then the header).
func BenchmarkDecodeFrameMove(b *testing.B) {
	p, err := Frame{Dir: "out", Kind: "request", Method: "tools/call", ID: json.RawMessage(`7`), Remote: "local", Generation: 1,
		TaskID: "fetch", Attempt: 1, EffectID: "0f3a9c2e7b1d4c5a", Move: &Move{To: "dispatched", Trigger: "send", Generation: 1},
		Body: json.RawMessage(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"m"},"_meta":{"progressToken":"agentctl-7"}}}`)}.AppendJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	e := events.Event{Type: FramePrefix + "request", Payload: string(p)}
	for b.Loop() {
		if m, err := FrameMove(e); err != nil || m == nil {
			b.Fatal(m, err)
		}
		if _, err := DecodeFrameHeader(e); err != nil {
			b.Fatal(err)
		}
	}
}
