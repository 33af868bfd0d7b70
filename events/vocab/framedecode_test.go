package vocab

import (
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzDecodeFrame holds the frame scan to encoding/json: whenever it takes
// a payload it must produce exactly what json.Unmarshal does.
func FuzzDecodeFrame(f *testing.F) {
	for _, s := range []string{
		`{"dir":"in","kind":"notification","method":"notifications/progress","remote":"local","generation":1,"taskId":"t","attempt":1,"effectId":"ab","body":{"jsonrpc":"2.0","params":{"x":[1,"}"]}}}`,
		`{"dir":"out","kind":"request","id":7,"httpStatus":200,"eventId":"e","remote":"r","generation":2,"body":null}`,
		` { "dir" : "in" , "kind":"response","id":"a\"b","remote":"","generation":0,"body":"str"} `,
		`{"dir":"in","dir":"out","kind":"x","remote":"r","generation":1,"body":1}`,
		`{"dir":"in","kind":"k","remote":"r","generation":01,"body":true}`,
		`{"dir":"out","kind":"request","id":3,"remote":"r","generation":1,"move":{"to":"dispatched","trigger":"send","generation":1},"body":{}}`,
		`{"dir":"out","kind":"request","remote":"r","generation":1,"move": null ,"body":{}}`,
		`{"dir":"in","kind":"response","remote":"r","generation":1,"move":{"TO":"failed","trigger":"error","reason":"a\"b","extra":[1]},"body":{}}`,
		`{"dir":"in","kind":"k","remote":"r","generation":1,"move":{"to":"x"},"move":{"trigger":"y"},"body":1}`,
		`{"dir":"in","kind":"k","remote":"r","generation":1,"move":[1],"body":1}`,
		`{"body":null,"move":{}}`,
		`{"dir":"in","kind":"k","remote":"r","body":{"a":"}"},"generation":2,"taskId":"t"}`,
		`{"dir":"in","kind":"k","remote":"r","generation":1,"body":1,"body":2}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if h, ok := scanFrame(p, true); ok {
			if full, ok := scanFrame(p, false); ok {
				full.Body = nil
				if !reflect.DeepEqual(h, full) {
					t.Fatalf("header of %q = %+v, frame without body %+v", p, h, full)
				}
			}
		}
		got, ok := scanFrame(p, false)
		if !ok {
			return
		}
		var want Frame
		if err := json.Unmarshal([]byte(p), &want); err != nil {
			t.Fatalf("scanFrame took %q, encoding/json refuses it: %v", p, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("scanFrame(%q)\n got %+v\nwant %+v", p, got, want)
		}
	})
}

// TestScanFrameMove: a frame that carries a move (every call's request
// and response frames) is read by the scan, move included, exactly as
// encoding/json reads it, instead of falling back to decoding the whole
// frame, body and all, twice per frame in the projection.
func TestScanFrameMove(t *testing.T) {
	for _, p := range []string{
		`{"dir":"out","kind":"request","method":"tools/call","id":3,"remote":"r","generation":1,"taskId":"t","attempt":1,"effectId":"e","move":{"to":"dispatched","trigger":"send","generation":1},"body":{"jsonrpc":"2.0","id":3}}`,
		`{"dir":"in","kind":"response","id":3,"httpStatus":200,"remote":"r","generation":2,"move":{"to":"failed","trigger":"error","reason":"tool said \"no\"","generation":2,"redispatches":1},"body":{"x":1}}`,
		`{"dir":"out","kind":"request","remote":"r","generation":1,"move":null,"body":{}}`,
	} {
		got, ok := scanFrame(p, false)
		if !ok {
			t.Fatalf("scanFrame(%q) fell back to encoding/json", p)
		}
		var want Frame
		if err := json.Unmarshal([]byte(p), &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("scanFrame(%q)\n got %+v\nwant %+v", p, got, want)
		}
		h, ok := scanFrame(p, true)
		want.Body = nil
		if !ok || !reflect.DeepEqual(h, want) {
			t.Fatalf("header scan of %q = %+v, %v; want %+v", p, h, ok, want)
		}
	}
	// A repeated move, or one encoding/json refuses, is left to encoding/json.
	for _, p := range []string{
		`{"dir":"in","kind":"k","remote":"r","generation":1,"move":{"to":"x"},"move":{"trigger":"y"},"body":1}`,
		`{"dir":"in","kind":"k","remote":"r","generation":1,"move":[1],"body":1}`,
	} {
		if _, ok := scanFrame(p, false); ok {
			t.Fatalf("scanFrame took %q", p)
		}
	}
}

// TestScanMoveObject: a move as the log writes it is read without
// encoding/json; anything else is declined, for encoding/json to read
// (FuzzDecodeFrame holds the two equal).
func TestScanMoveObject(t *testing.T) {
	for p, want := range map[string]*Move{
		`{"to":"dispatched","trigger":"send","generation":1}`:                                       {To: "dispatched", Trigger: "send", Generation: 1},
		` { "to" : "failed" , "trigger":"error","reason":"boom","generation":2,"redispatches":3 } `: {To: "failed", Trigger: "error", Reason: "boom", Generation: 2, Redispatches: 3},
		`{}`:                   {},
		`{"to":"a\"b"}`:        nil,
		`{"to":"a","to":"b"}`:  nil,
		`{"To":"a"}`:           nil,
		`{"to":"a","extra":1}`: nil,
		`{"generation":1.0}`:   nil,
		`{"to":"a",}`:          nil,
		`{"to":"a"} x`:         nil,
	} {
		var m Move
		ok := scanMoveObject(p, &m)
		if want == nil {
			if ok {
				t.Errorf("scanMoveObject(%q) took it: %+v", p, m)
			}
			continue
		}
		if !ok || m != *want {
			t.Errorf("scanMoveObject(%q) = %+v, %v; want %+v", p, m, ok, *want)
		}
	}
}

// TestScanFrameHeaderReadsPastBody: the header scan skips the body but
// still reads the members after it, so a frame whose body is not last has
// the header its whole frame has (fuzz: a move after a null body was read
// by the whole scan only).
func TestScanFrameHeaderReadsPastBody(t *testing.T) {
	for p, want := range map[string]Frame{
		`{"body":null,"move":{}}`: {Move: &Move{}},
		`{"dir":"in","kind":"k","remote":"r","body":{"a":"}"},"generation":2,"taskId":"t"}`: {Dir: "in", Kind: "k", Remote: "r", Generation: 2, TaskID: "t"},
	} {
		h, ok := scanFrame(p, true)
		if !ok || !reflect.DeepEqual(h, want) {
			t.Fatalf("header scan of %q = %+v, %v; want %+v", p, h, ok, want)
		}
	}
	if _, ok := scanFrame(`{"dir":"in","body":1,"body":2}`, true); ok {
		t.Fatal("the header scan took a repeated body")
	}
}
