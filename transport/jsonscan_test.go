package transport

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// referenceMembers is the json.Decoder token walk members replaced.
func referenceMembers(b []byte) (keys []string, raws []string, err error) {
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
		keys, raws = append(keys, t.(string)), append(raws, string(raw))
	}
	return keys, raws, nil
}

// FuzzMembers holds the one-pass member scan to encoding/json's reading of
// every valid JSON object in valid UTF-8 (decodeMessage refuses the rest first): same names (escapes decoded), same raw values.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":"]}"}], "\u0061":"x\"y", "n":null,"t":true,"f":-1.5e3} `,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}`, `{"a\\b":{"x":[]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tb := bytes.TrimSpace(b)
		if !json.Valid(tb) || !utf8.Valid(tb) || len(tb) == 0 || tb[0] != '{' {
			return
		}
		wantKeys, wantRaws, err := referenceMembers(tb)
		if err != nil {
			t.Fatalf("reference: %v", err)
		}
		var keys, raws []string
		if err := members(tb, func(k string, raw json.RawMessage) error {
			keys, raws = append(keys, k), append(raws, string(raw))
			return nil
		}); err != nil {
			t.Fatalf("members(%q): %v", tb, err)
		}
		if len(keys) != len(wantKeys) {
			t.Fatalf("members(%q) = %q, want %q", tb, keys, wantKeys)
		}
		for i := range keys {
			if keys[i] != wantKeys[i] || raws[i] != wantRaws[i] {
				t.Fatalf("members(%q)[%d] = %q:%q, want %q:%q", tb, i, keys[i], raws[i], wantKeys[i], wantRaws[i])
			}
		}
	})
}
