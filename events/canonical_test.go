package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// referenceCanonical is the encoding the chain was defined with.
func referenceCanonical(runID string, seq int64, stream, typ, payload string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode([]any{runID, seq, stream, typ, payload})
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func TestCanonicalMatchesEncodingJSON(t *testing.T) {
	cases := []string{"", "plain", `{"a":"b\"c","d":[1,2.5e3,null]}`, "<html>&amp;</html>", "tab\tnl\nret\rbs\\q\"",
		"\b\f\x00\x01\x1f\x7f", "\u2028\u2029\u2027\u202a", "\xff\xfe", "a\xc3", "\xed\xa0\x80", "héllo wörld ✓ 😀",
		strings.Repeat("x", 5000)}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "\"", "\\", "\n", "\x00", "\x1f", "\x7f", "<", "&", "\u2028", "\u2029", "é", "😀", "\xff", "\xe2\x80", " ", "{", "}"}
	for i := 0; i < 5000; i++ {
		var b strings.Builder
		for j := rng.IntN(40); j > 0; j-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		cases = append(cases, b.String())
	}
	for _, s := range cases {
		for _, seq := range []int64{0, 1, -7, 1 << 62} {
			got, want := canonical(s, seq, "call/"+s, "t"+s, s), referenceCanonical(s, seq, "call/"+s, "t"+s, s)
			if !bytes.Equal(got, want) {
				t.Fatalf("canonical(%q):\n got %s\nwant %s", s, got, want)
			}
		}
	}
}

func FuzzCanonical(f *testing.F) {
	f.Add("run-1", int64(3), "call/x", "mcp.notification", `{"body":"\u2028<"}`)
	f.Fuzz(func(t *testing.T, runID string, seq int64, stream, typ, payload string) {
		if got, want := canonical(runID, seq, stream, typ, payload), referenceCanonical(runID, seq, stream, typ, payload); !bytes.Equal(got, want) {
			t.Fatalf("got %s want %s", got, want)
		}
	})
}

func BenchmarkCanonical(b *testing.B) {
	payload := `{"dir":"in","kind":"notification","method":"notifications/progress","remote":"local","generation":1,"taskId":"only","attempt":1,"body":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":"0123456789abcdef","total":10000}}}`
	for i := 0; i < b.N; i++ {
		_ = canonical("run-0190e5c4-1b7e-7cc3-8b9a-3c5d5f6e7a8b", int64(i), "call/0123456789abcdef", "mcp.notification", payload)
	}
}

// TestCanonicalV2MatchesEncodingJSON: the v2 array is encoding/json's
// [runID, seq, stream, type, payload, createdAt].
func TestCanonicalV2MatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", "\u2028<&>\"\\\x00", "2026-12-03T13:28:10.123456789Z", "héllo 😀"} {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		_ = enc.Encode([]any{"run-" + s, int64(7), "call/" + s, "t" + s, s, s + "Z"})
		if got, want := canonicalV2("run-"+s, 7, "call/"+s, "t"+s, s, s+"Z"), bytes.TrimSuffix(buf.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
			t.Fatalf("canonicalV2(%q):\n got %s\nwant %s", s, got, want)
		}
	}
}

// BenchmarkChainHash: the cost of covering created_at (v2) against v1, per
// event appended or verified.
func BenchmarkChainHash(b *testing.B) {
	e := Event{RunID: "run-0190e5c4-1b7e-7cc3-8b9a-3c5d5f6e7a8b", Seq: 42, Stream: "call/0123456789abcdef", Type: "mcp.notification",
		Payload:   `{"dir":"in","kind":"notification","method":"notifications/progress","remote":"local","generation":1,"taskId":"only","attempt":1,"body":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":"0123456789abcdef","total":10000}}}`,
		CreatedAt: "2026-12-03T13:28:10.123456789Z", PrevHash: "v2:" + strings.Repeat("ab", 32)}
	for _, v := range []int{ChainV1, ChainV2} {
		b.Run(fmt.Sprintf("v%d", v), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_ = ChainHash(v, e)
			}
		})
	}
}
