package vocab

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"
	"testing/quick"

	"github.com/agentctl/agentctl/events"
)

func referenceJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// trickyStrings are strings whose JSON encodings differ between careless
// encoders: HTML characters, control bytes, invalid UTF-8, U+2028/2029.
var trickyStrings = []string{"", "a", "<b>&amp;</b>", "\x00\x1f\t\n\r\b\f", "\"\\/", "\xff\xfe", "é\u2028\u2029", "\ud7ff\U0001F600", "a\xc3"}

// rawSamples are json.RawMessage values, valid (spacing and HTML left for
// compaction to keep or drop) and not.
var rawSamples = []json.RawMessage{nil, json.RawMessage(`{}`), json.RawMessage(` { "a" : [1, 2.50, "<&>"] , "b":null } `), json.RawMessage(`7`),
	json.RawMessage(`"x\u2028"`), json.RawMessage(`{"a":`), json.RawMessage{}}

// fill sets every field of the struct v points to at random: strings and
// raw messages from the samples above half the time, anything
// testing/quick makes otherwise; pointers to structs and slices of them
// filled the same way, or nil.
func fill(v reflect.Value, r *rand.Rand) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[json.RawMessage]():
			f.Set(reflect.ValueOf(rawSamples[r.Intn(len(rawSamples))]))
		case f.Kind() == reflect.String && r.Intn(2) == 0:
			f.SetString(trickyStrings[r.Intn(len(trickyStrings))])
		case f.Kind() == reflect.Pointer:
			if r.Intn(2) == 0 {
				f.Set(reflect.Zero(f.Type()))
				continue
			}
			p := reflect.New(f.Type().Elem())
			fill(p.Elem(), r)
			f.Set(p)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Struct:
			n := r.Intn(4) - 1 // nil, empty, or up to 2 elements
			if n < 0 {
				f.Set(reflect.Zero(f.Type()))
				continue
			}
			s := reflect.MakeSlice(f.Type(), n, n)
			for j := range n {
				fill(s.Index(j), r)
			}
			f.Set(s)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			var s []string // nil, or up to 2 strings
			for range r.Intn(3) {
				s = append(s, trickyStrings[r.Intn(len(trickyStrings))])
			}
			f.Set(reflect.ValueOf(s))
		default:
			q, ok := quick.Value(f.Type(), r)
			if !ok {
				panic("quick.Value: " + f.Type().String())
			}
			if r.Intn(3) == 0 { // zero values, for omitempty
				q = reflect.Zero(f.Type())
			}
			f.Set(q)
		}
	}
}

// TestFactJSONMatchesEncodingJSON holds each fact's AppendJSON to
// encoding/json (SetEscapeHTML(false)) byte for byte, every field set at
// random (a field added to a type is filled too, so an encoder that
// forgets it fails here), errors alike for raw values encoding/json
// refuses; and marshalled through the log, the payload is the same.
func TestFactJSONMatchesEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewSource(34))
	for _, typ := range []reflect.Type{reflect.TypeFor[TaskStarted](), reflect.TypeFor[TaskFinished](), reflect.TypeFor[CallPrepared](),
		reflect.TypeFor[CallResult](), reflect.TypeFor[RunStarted](), reflect.TypeFor[SessionOpened](), reflect.TypeFor[SessionCatalog]()} {
		for n := 0; n < 3000; n++ {
			v := reflect.New(typ).Elem()
			fill(v, r)
			p := v.Interface()
			want, werr := referenceJSON(p)
			got, gerr := p.(events.PayloadAppender).AppendJSON(nil)
			if (werr == nil) != (gerr == nil) {
				t.Fatalf("%s %+v: reference error %v, AppendJSON error %v", typ, p, werr, gerr)
			}
			if werr == nil && !bytes.Equal(got, want) {
				t.Fatalf("%s AppendJSON:\n got %s\nwant %s", typ, got, want)
			}
		}
	}
}
