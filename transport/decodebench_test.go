package transport

import (
	"encoding/json"
	"strings"
	"testing"
)

// BenchmarkDecodeMessage is the decode of every message a server sends:
// a progress notification (the frequent case) and a 4 KiB tools/call result.
func BenchmarkDecodeMessage(b *testing.B) {
	text := strings.Repeat("lorem ipsum dolor sit amet ", 150)
	for _, bc := range []struct{ name, msg string }{
		{"progress", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"agentctl-2","progress":17,"total":100,"message":"step 17 of 100"}}`},
		{"result4k", `{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"` + text + `"}],"structuredContent":{"ok":true,"n":[1,2,3],"s":"` + text[:200] + `"},"isError":false}}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			msg := []byte(bc.msg)
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, _, err := decodeFor(msg, json.RawMessage(`2`)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
