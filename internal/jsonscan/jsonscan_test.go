package jsonscan

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// referenceMembers is encoding/json's reading of an object's members: a
// json.Decoder token walk.
func referenceMembers(b []byte) (names []string, raws []string, err error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, err
		}
		names, raws = append(names, t.(string)), append(raws, string(raw))
	}
	return names, raws, nil
}

// FuzzScan holds the whole scanner to encoding/json, on both Text types:
//   - on valid input (a valid JSON value in valid UTF-8), Members finds the
//     names (escapes decoded) and raw values a json.Decoder finds, and
//     ValueEnd and SkipValue find the end of the value;
//   - on any input, whatever PlainString, PlainInt and SkipValue accept,
//     encoding/json decodes to the same value (PlainString: when it is
//     valid UTF-8, which encoding/json would rewrite).
func FuzzScan(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":"]}"}], "\u0061":"x\"y", "n":null,"t":true,"f":-1.5e3} `,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`, `{"a\\b":{"x":[]}}`,
		`"plain",`, `"esc\"aped"}`, `12,`, `-0 `, `01,`, `1.5}`, `99999999999999999999,`, `[1,"]"] ,`, `{"a":"}"}}`, `tru,`, `"\u0000"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAnyInput(t, b)
		checkAnyInput(t, string(b))
		tb := trimJSON(b)
		if len(tb) == 0 || !json.Valid(tb) || !utf8.Valid(tb) {
			return
		}
		// A valid value: each end finder stops where it ends.
		for _, end := range []int{ValueEnd(tb, 0), ValueEnd(string(tb), 0)} {
			if end != len(tb) {
				t.Fatalf("ValueEnd(%q) = %d, want %d", tb, end, len(tb))
			}
		}
		for _, delim := range []string{",", "}", "]"} {
			p := string(b) + delim
			i := SkipSpace(p, 0)
			end, ok := SkipValue(p, i)
			if !ok || end < i+len(tb) || end > len(b) || string(trimJSON([]byte(p[i:end]))) != string(tb) {
				t.Fatalf("SkipValue(%q, %d) = %d, %v; want the end of %q", p, i, end, ok, tb)
			}
		}
		if tb[0] != '{' {
			return
		}
		wantNames, wantRaws, err := referenceMembers(tb)
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		var names, raws []string
		if err := Members(tb, func(n string, raw []byte) error {
			names, raws = append(names, n), append(raws, string(raw))
			return nil
		}); err != nil {
			t.Fatalf("Members(%q): %v", tb, err)
		}
		if len(names) != len(wantNames) {
			t.Fatalf("Members(%q) = %q, want %q", tb, names, wantNames)
		}
		for i := range names {
			if names[i] != wantNames[i] || raws[i] != wantRaws[i] {
				t.Fatalf("Members(%q)[%d] = %q:%q, want %q:%q", tb, i, names[i], raws[i], wantNames[i], wantRaws[i])
			}
		}
	})
}

// checkAnyInput: what the any-input functions accept at the start of p,
// encoding/json decodes to the same value.
func checkAnyInput[T Text](t *testing.T, p T) {
	t.Helper()
	i := SkipSpace(p, 0)
	if s, end, ok := PlainString(p, i); ok {
		var want string
		if err := json.Unmarshal([]byte(p[i:end]), &want); err != nil || want != string(s) && utf8.ValidString(string(s)) {
			t.Fatalf("PlainString(%q) = %q, encoding/json: %q, %v", p, s, want, err)
		}
	}
	if n, end, ok := PlainInt(p, i); ok {
		var want int
		if err := json.Unmarshal([]byte(p[i:end]), &want); err != nil || want != n || end >= len(p) || !intDelim(p[end]) {
			t.Fatalf("PlainInt(%q) = %d, %d, encoding/json: %d, %v", p, n, end, want, err)
		}
	}
	if end, ok := SkipValue(p, i); ok {
		var raw json.RawMessage
		if err := json.NewDecoder(bytes.NewReader([]byte(p[i:]))).Decode(&raw); err != nil || string(raw) != string(trimJSON([]byte(p[i:end]))) {
			t.Fatalf("SkipValue(%q) took %q, encoding/json reads %q, %v", p, p[i:end], raw, err)
		}
	}
}

func TestPlainInt(t *testing.T) {
	for _, tc := range []struct {
		in string
		n  int
		ok bool
	}{
		{"12,", 12, true}, {"-3}", -3, true}, {"0 ", 0, true}, {"01,", 0, false}, {"-00 ", 0, false}, {"-01,", 0, false}, {"-0,", 0, true}, {"1.5,", 0, false},
		{"1e2,", 0, false}, {"1", 0, false}, {"-,", 0, false}, {"99999999999999999999,", 0, false}, {",", 0, false},
	} {
		n, _, ok := PlainInt(tc.in, 0)
		if ok != tc.ok || n != tc.n {
			t.Errorf("PlainInt(%q) = %d, %v; want %d, %v", tc.in, n, ok, tc.n, tc.ok)
		}
	}
}

// trimJSON trims JSON whitespace (bytes.TrimSpace would also take \f, \v…).
func trimJSON(b []byte) []byte { return bytes.Trim(b, " \t\r\n") }
