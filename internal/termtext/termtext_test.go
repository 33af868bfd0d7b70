package termtext

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"", ""},
		{"héllo wörld ✓", "héllo wörld ✓"},
		{"\x1b[31mred\x1b[0m", "\uFFFD[31mred\uFFFD[0m"},
		{"\x1b]0;owned\x07title", "\uFFFD]0;owned\uFFFDtitle"},             // OSC 0 + BEL
		{"\x1b]52;c;ZXZpbA==\x07", "\uFFFD]52;c;ZXZpbA==\uFFFD"},           // OSC 52 clipboard
		{"\x1b[2Jcleared", "\uFFFD[2Jcleared"},                             // clear screen
		{"csi\u009b31m", "csi\uFFFD31m"},                                   // C1 CSI
		{"evil\u202Etxt.exe", "evil\uFFFDtxt.exe"},                         // RLO
		{"a\u2066b\u2069c\u200Fd\u061Ce", "a\uFFFDb\uFFFDc\uFFFDd\uFFFDe"}, // isolates, RLM, ALM
		{"one\ntwo\tthree\r", "one\uFFFDtwo\uFFFDthree\uFFFD"},
		{"sep\u2028par\u2029", "sep\uFFFDpar\uFFFD"},
		{"del\x7f", "del\uFFFD"},
		{"bad\xffbyte", "bad\uFFFDbyte"},
	} {
		if got := Line(tc.in); got != tc.want {
			t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBlockKeepsLayout(t *testing.T) {
	in := "line one\n\tindented \x1b[1mbold\u202E\r\n"
	want := "line one\n\tindented \uFFFD[1mbold\uFFFD\uFFFD\n"
	if got := Block(in); got != want {
		t.Errorf("Block(%q) = %q, want %q", in, got, want)
	}
}

// FuzzLine: whatever goes in, what comes out is valid UTF-8 with no
// control, bidi control or separator left.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"\x1b[31m", "\u202E", "ok", "\xff\xfe", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Line(s)
		if !utf8.ValidString(out) {
			t.Fatalf("Line(%q) = %q: invalid UTF-8", s, out)
		}
		for _, r := range out {
			if unsafeRune(r, false) {
				t.Fatalf("Line(%q) = %q keeps %U", s, out, r)
			}
		}
		if !strings.ContainsRune(s, Replacement) && safe(s, false) && out != s {
			t.Fatalf("safe input changed: %q -> %q", s, out)
		}
	})
}
