package projector

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestRemoteJSONIsWhatTheLogStores: remoteJSON(raw) is byte for byte what
// the payload encoder (encoding/json, HTML escaping off, as events
// encodes a payload) stores for a json.RawMessage member, so the live
// projection and a rebuild from the log write the same column.
func TestRemoteJSONIsWhatTheLogStores(t *testing.T) {
	for _, raw := range []string{
		`{"name":"x","version":"1"}`,
		`{"name": "x", "version": "1"}`,
		"{ \"version\" : \"1.0 \\u00e9\\n\" ,\t\"name\":\"a\\/b <b>&amp;\",\r\n \"zeta\": [ 1, 2 ,3 ], \"alpha\" : {\"b\" : 1e5 , \"a\" : \"x\\ty \u2028 \\ud800\"} }",
		`[ ]`, ` "s p" `, `12.50`, `null`,
	} {
		type payload struct {
			ServerInfo json.RawMessage `json:"serverInfo"`
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(payload{json.RawMessage(raw)}); err != nil {
			t.Fatal(err)
		}
		var stored payload
		if err := json.Unmarshal(b.Bytes(), &stored); err != nil {
			t.Fatal(err)
		}
		if got, want := remoteJSON(json.RawMessage(raw)), string(stored.ServerInfo); got != want {
			t.Errorf("remoteJSON(%q) = %q, the log stores %q", raw, got, want)
		}
		if got := remoteJSON(stored.ServerInfo); got != string(stored.ServerInfo) {
			t.Errorf("remoteJSON of the stored %q = %q", stored.ServerInfo, got)
		}
	}
}
