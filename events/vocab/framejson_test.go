package vocab

import (
	"bytes"
	"encoding/json"
	"testing"
)

func referenceFrameJSON(f Frame) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// FuzzFrameJSON holds Frame.AppendJSON to encoding/json byte for byte: the
// stored payload (and so the hash chain) must not depend on which encoder
// wrote it.
func FuzzFrameJSON(f *testing.F) {
	f.Add("in", "notification", "notifications/progress", `7`, 0, "", "local", 1, "t", 1, "ab", `{"jsonrpc":"2.0", "x":"<&>\u2028"}`)
	f.Add("out", "request", "", `"a\"b"`, 503, "ev-1", "r\x00", 0, "", 0, "", `"\ud800"`)
	f.Add("in", "response", "", ``, 0, "", "", 2, "task/é", -1, "", `null`)
	f.Fuzz(func(t *testing.T, dir, kind, method, id string, status int, eventID, remote string, gen int, task string, attempt int, effect, body string) {
		fr := Frame{Dir: dir, Kind: kind, Method: method, HTTPStatus: status, EventID: eventID, Remote: remote, Generation: gen,
			TaskID: task, Attempt: attempt, EffectID: effect}
		if id != "" {
			fr.ID = json.RawMessage(id)
		}
		if body != "" {
			fr.Body = json.RawMessage(body)
		}
		want, werr := referenceFrameJSON(fr)
		got, gerr := fr.AppendJSON(nil)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("errors differ: reference %v, AppendJSON %v", werr, gerr)
		}
		if werr == nil && !bytes.Equal(got, want) {
			t.Fatalf("AppendJSON:\n got %s\nwant %s", got, want)
		}
	})
}

func TestFrameJSONMatchesEncodingJSON(t *testing.T) {
	fr := Frame{Dir: "in", Kind: "notification", Method: "notifications/progress", Remote: "local", Generation: 1, TaskID: "only", Attempt: 1,
		EffectID: "abab", Body: json.RawMessage(`{ "jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1.50, "m": "<b>"} }`)}
	want, _ := referenceFrameJSON(fr)
	got, err := fr.AppendJSON(nil)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("AppendJSON = %s, %v\nwant %s", got, err, want)
	}
}
