package vocab

import (
	"encoding/json"
	"testing"
)

func TestScanFrameKey(t *testing.T) {
	real, _ := json.Marshal(Frame{Dir: "in", Kind: "notification", Method: "notifications/progress", ID: json.RawMessage(`7`), HTTPStatus: 200,
		EventID: "e1", Remote: "local", Generation: 2, TaskID: "fetch", Attempt: 3, EffectID: "ab", Body: json.RawMessage(`{"x":"\"taskId\":\"evil\""}`)})
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{string(real), true},
		{`{"dir":"in","kind":"request","remote":"r","generation":1,"body":{"a":[1,{"b":"}"}]}}`, true}, // no task: zero key
		{`{"body":{"taskId":"evil","attempt":9},"taskId":"t","attempt":2}`, true},
		{` { "taskId" : "t" , "attempt" : 12 } `, true},
		{`{"attempt":1,"taskId":"t","body":null}`, true},
		{`{}`, true},
		{`{"taskId":"t\u0041","attempt":1}`, false},
		{`{"t\u0061skId":"x","attempt":1}`, false},
		{`{"taskId":"t","attempt":1.5}`, false},
		{`{"taskId":"t","attempt":01}`, false},
		{`{"taskId":"t","attempt":-01}`, false}, // encoding/json refuses a leading zero after the sign too
		{`{"taskId":"t","taskId":"u","attempt":1}`, false},
		{`{"dir":"in",}`, false},
		{`{"dir":"in"`, false},
		{`{"dir":[1,2}`, false},
		{`[1]`, false},
		{`{"dir":"a\"b","taskId":"t","attempt":4}`, true},
	} {
		k, ok := scanFrameKey(tc.in)
		if ok != tc.ok {
			t.Errorf("scanFrameKey(%s): ok %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		var want FrameKey
		if err := json.Unmarshal([]byte(tc.in), &want); err != nil {
			t.Errorf("scanFrameKey(%s) accepted invalid JSON: %v", tc.in, err)
		} else if k != want {
			t.Errorf("scanFrameKey(%s) = %+v, encoding/json says %+v", tc.in, k, want)
		}
	}
}
