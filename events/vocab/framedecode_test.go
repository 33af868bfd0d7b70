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
