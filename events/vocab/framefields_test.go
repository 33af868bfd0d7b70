package vocab

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
)

// TestFrameFieldsKnownToCodecs reflects over Frame so that a field added to
// the struct and not to its hand-kept codecs fails here: Frame.AppendJSON
// (framejson.go) must write it as encoding/json does, frameMember
// (framedecode.go) must route its member to that field, and the scan must
// read it back. FuzzFrameJSON and FuzzDecodeFrame build frames field by
// field and would not notice a new one.
func TestFrameFieldsKnownToCodecs(t *testing.T) {
	typ := reflect.TypeFor[Frame]()
	all := Frame{}
	bits := map[uint16]string{}
	for i := range typ.NumField() {
		sf := typ.Field(i)
		name, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			t.Errorf("Frame.%s has no JSON member name", sf.Name)
			continue
		}
		// A frame with this field alone set (and the members always written).
		one := Frame{}
		if !setSample(reflect.ValueOf(&one).Elem().Field(i)) || !setSample(reflect.ValueOf(&all).Elem().Field(i)) {
			t.Errorf("Frame.%s: type %s unknown to this test; teach it here and to AppendJSON, frameMember and scanFrame", sf.Name, sf.Type)
			continue
		}
		want, err := referenceFrameJSON(one)
		if err != nil {
			t.Fatal(err)
		}
		got, err := one.AppendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("Frame.%s: AppendJSON = %s, %v; encoding/json writes %s", sf.Name, got, err, want)
		}
		if name == "move" {
			continue // scanFrame reads the move itself (scanMove), not through frameMember
		}
		// frameMember routes the member to this very field, with its own bit.
		var f Frame
		bit, str, num, raw := frameMember(&f, name)
		if bit == 0 {
			t.Errorf("Frame.%s: frameMember does not know member %q", sf.Name, name)
			continue
		}
		if other, dup := bits[bit]; dup {
			t.Errorf("Frame.%s and %s share frameMember bit %#x", sf.Name, other, bit)
		}
		bits[bit] = sf.Name
		addr := reflect.ValueOf(&f).Elem().Field(i).Addr().UnsafePointer()
		var routed any
		for _, p := range []any{str, num, raw} {
			if !reflect.ValueOf(p).IsNil() {
				routed = p
			}
		}
		if routed == nil || reflect.ValueOf(routed).UnsafePointer() != addr {
			t.Errorf("Frame.%s: frameMember(%q) does not point at the field", sf.Name, name)
		}
	}
	// Every field set at once: the scan reads back what encoding/json wrote.
	p, err := referenceFrameJSON(all)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := scanFrame(string(p), false); !ok || !reflect.DeepEqual(got, all) {
		t.Errorf("scanFrame(%s) = %+v, %v; want %+v", p, got, ok, all)
	}
	got, err := DecodeFrame(events.Event{Type: "mcp.request", Payload: string(p)})
	if err != nil || !reflect.DeepEqual(got, all) {
		t.Errorf("DecodeFrame(%s) = %+v, %v; want %+v", p, got, err, all)
	}
	all.Move = nil
	if p, err = referenceFrameJSON(all); err != nil {
		t.Fatal(err)
	}
	got, ok := scanFrame(string(p), false)
	if !ok || !reflect.DeepEqual(got, all) {
		t.Errorf("scanFrame(%s) = %+v, %v; want %+v", p, got, ok, all)
	}
}

// setSample sets v to a non-zero value of its type; false for a type the
// frame codecs do not handle.
func setSample(v reflect.Value) bool {
	switch {
	case v.Type() == reflect.TypeFor[json.RawMessage]():
		v.Set(reflect.ValueOf(json.RawMessage(`{"a":[1,"x"]}`)))
	case v.Kind() == reflect.String:
		v.SetString("s-" + strings.ToLower(v.Type().Name()))
	case v.Kind() == reflect.Int:
		v.SetInt(7)
	case v.Type() == reflect.TypeFor[*Move]():
		v.Set(reflect.ValueOf(&Move{To: "dispatched", Trigger: "dispatch", Reason: "r<&>\u2028", Generation: 2, Redispatches: 1}))
	default:
		return false
	}
	return true
}
