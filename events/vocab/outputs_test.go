package vocab_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/canonjson"
)

// outputsLog is a call whose call.result and task.finished left their
// output out: its response frame and what the writer recorded.
func outputsLog(t *testing.T, result string, rec vocab.CallResult) (frame, prepared, callResult, finished events.Event) {
	t.Helper()
	mk := func(seq int64, stream, typ string, p any) events.Event {
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		return events.Event{Seq: seq, Stream: stream, Type: typ, Payload: string(b)}
	}
	prepared = mk(1, "call/e1", vocab.TypeCallPrepared, vocab.CallPrepared{EffectID: "e1", TaskID: "a", Attempt: 2})
	frame = mk(2, "call/e1", vocab.FramePrefix+"response", vocab.Frame{Dir: "in", Kind: "response", ID: json.RawMessage("7"), Remote: "r", Generation: 1, EffectID: "e1",
		Body: json.RawMessage(`{"jsonrpc":"2.0","id":7,"result":` + result + `}`)})
	callResult = mk(3, "call/e1", vocab.TypeCallResult, rec)
	finished = mk(4, "task/a/2", vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: "a", Attempt: 2, State: "succeeded", OutputOfCall: true})
	return
}

// TestOutputs_RestoresWhatTheLogLeftOut: a call.result written without
// its output gets the structuredContent (or content) its response frame
// holds, and the task.finished of its attempt gets the same; a frame that
// does not hold the result recorded (another digest, another id) is a
// corrupt log (ErrOutputMissing), never a guess.
func TestOutputs_RestoresWhatTheLogLeftOut(t *testing.T) {
	result := `{"content":[{"type":"text","text":"hi"}],"structuredContent":{"b":1,"a":"x"}}`
	good := vocab.CallResult{EffectID: "e1", JSONRPCID: json.RawMessage("7"), ResultDigest: canonjson.DigestBytes([]byte(result)), OutputInResponse: true}
	for _, tc := range []struct {
		name       string
		structured bool
		mutate     func(*vocab.CallResult)
		want, fail string
	}{
		{name: "structured", structured: true, want: `{"b":1,"a":"x"}`},
		{name: "content", want: `[{"type":"text","text":"hi"}]`},
		{name: "other digest", structured: true, mutate: func(r *vocab.CallResult) { r.ResultDigest = canonjson.DigestBytes([]byte("{}")) }, fail: "digest"},
		{name: "other id", structured: true, mutate: func(r *vocab.CallResult) { r.JSONRPCID = json.RawMessage("8") }, fail: "id"},
		{name: "no frame", structured: true, mutate: func(r *vocab.CallResult) { r.EffectID = "e2" }, fail: "no response frame"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := good
			rec.Structured = tc.structured
			if tc.mutate != nil {
				tc.mutate(&rec)
			}
			frame, prepared, ce, fe := outputsLog(t, result, rec)
			var o vocab.Outputs
			p, err := vocab.Decode[vocab.CallPrepared](prepared)
			if err != nil {
				t.Fatal(err)
			}
			o.Prepared(p)
			o.Frame(frame)
			r, err := vocab.Decode[vocab.CallResult](ce)
			if err != nil {
				t.Fatal(err)
			}
			err = o.Result(ce, &r)
			if tc.fail != "" {
				if !errors.Is(err, vocab.ErrOutputMissing) || !strings.Contains(err.Error(), tc.fail) {
					t.Fatalf("Result: %v, want ErrOutputMissing naming %q", err, tc.fail)
				}
				return
			}
			if err != nil || string(r.Output) != tc.want {
				t.Fatalf("Result: output %s, %v; want %s", r.Output, err, tc.want)
			}
			f, err := vocab.Decode[vocab.TaskFinished](fe)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Finished(fe, &f); err != nil || string(f.Output) != tc.want {
				t.Fatalf("Finished: output %s, %v; want %s", f.Output, err, tc.want)
			}
		})
	}
	// A task.finished that left out an output its attempt's call does not
	// have is corrupt too; one written with its output reads as written.
	var o vocab.Outputs
	_, _, _, fe := outputsLog(t, result, good)
	f, _ := vocab.Decode[vocab.TaskFinished](fe)
	if err := o.Finished(fe, &f); !errors.Is(err, vocab.ErrOutputMissing) {
		t.Fatalf("Finished without a call result: %v, want ErrOutputMissing", err)
	}
	// A response the call sent (answering a server's request) is not the
	// one that holds its result.
	frame, prepared, ce, _ := outputsLog(t, result, vocab.CallResult{EffectID: "e1", JSONRPCID: json.RawMessage("7"),
		ResultDigest: good.ResultDigest, OutputInResponse: true, Structured: true})
	sent := events.Event{Seq: 3, Stream: "call/e1", Type: vocab.FramePrefix + "response",
		Payload: `{"dir":"out","kind":"response","id":1,"remote":"r","generation":1,"body":{"jsonrpc":"2.0","id":1,"result":{}}}`}
	var o2 vocab.Outputs
	p, _ := vocab.Decode[vocab.CallPrepared](prepared)
	o2.Prepared(p)
	o2.Frame(frame)
	o2.Frame(sent)
	r, _ := vocab.Decode[vocab.CallResult](ce)
	if err := o2.Result(ce, &r); err != nil || string(r.Output) != `{"b":1,"a":"x"}` {
		t.Fatalf("Result after a sent response: %s, %v", r.Output, err)
	}
	old := vocab.TaskFinished{TaskID: "a", Attempt: 1, State: "succeeded", Output: json.RawMessage(`{"k":1}`)}
	if err := o.Finished(fe, &old); err != nil || string(old.Output) != `{"k":1}` {
		t.Fatalf("Finished of an old log's task.finished: %s, %v", old.Output, err)
	}
}

// TestStoredFrame_EffectIDFromStream: a frame on its call's stream is
// written without its effectId, and every frame decoder gives it back from
// the stream; a frame on another stream, or one written with its effectId
// (logs before), reads as written.
func TestStoredFrame_EffectIDFromStream(t *testing.T) {
	f := vocab.Frame{Dir: "in", Kind: "response", ID: json.RawMessage("3"), Remote: "r", Generation: 1, TaskID: "a", Attempt: 1, EffectID: "e1",
		Body: json.RawMessage(`{"jsonrpc":"2.0","id":3,"result":{}}`)}
	stored := vocab.StoredFrame("call/e1", f)
	b, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "effectId") {
		t.Fatalf("stored frame %s keeps its effectId", b)
	}
	if got := vocab.StoredFrame("session/r/1", f); got.EffectID != "e1" {
		t.Fatalf("a frame on a session stream lost its effectId")
	}
	old, _ := json.Marshal(f)
	for _, tc := range []struct {
		stream, payload, want string
	}{
		{"call/e1", string(b), "e1"},
		{"call/e1", string(old), "e1"},
		{"call/e2", string(old), "e1"}, // as written, whatever the stream
		{"session/r/1", string(b), ""},
		{"call/e1", strings.Replace(string(b), `"dir"`, `"di\u0072"`, 1), "e1"}, // the encoding/json path
	} {
		e := events.Event{Seq: 1, Stream: tc.stream, Type: vocab.FramePrefix + "response", Payload: tc.payload}
		full, err := vocab.DecodeFrame(e)
		if err != nil {
			t.Fatal(err)
		}
		head, err := vocab.DecodeFrameHeader(e)
		if err != nil {
			t.Fatal(err)
		}
		p, err := vocab.Payload(e)
		if err != nil {
			t.Fatal(err)
		}
		if full.EffectID != tc.want || head.EffectID != tc.want || p.(vocab.Frame).EffectID != tc.want {
			t.Errorf("%s %s: effectId %q, header %q, payload %q; want %q", tc.stream, tc.payload, full.EffectID, head.EffectID, p.(vocab.Frame).EffectID, tc.want)
		}
	}
}
