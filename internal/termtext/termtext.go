// Package termtext is the one sanitizer for text printed to a human:
// remote strings (tool names, descriptions, results, error messages,
// status messages) and user strings pass through it before they reach a
// terminal, so they cannot move the cursor, recolour the screen, set the
// window title, write the clipboard (OSC 52), ring the bell, or reorder
// what is shown with Unicode bidi controls. JSON outputs do not use it:
// there the data stays data, escaped by the encoder.
package termtext

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Replacement stands in for every neutralised character.
const Replacement = '\uFFFD'

// Line returns s safe to print on one line: every C0 and C1 control
// (ESC, BEL, CSI 0x9b, CR, LF, TAB…), DEL, every Unicode bidi control
// (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C), the line and paragraph
// separators and invalid UTF-8 become U+FFFD. An escape sequence is thereby
// broken at its introducer: what follows it is shown as plain text.
func Line(s string) string { return clean(s, false) }

// Block is Line for text that may span lines: LF and TAB are kept, every
// other character Line neutralises is neutralised.
func Block(s string) string { return clean(s, true) }

func clean(s string, keepLayout bool) string {
	if safe(s, keepLayout) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r, keepLayout) {
			b.WriteRune(Replacement)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// safe reports whether s needs no change (the common case: no allocation).
func safe(s string, keepLayout bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return safeSlow(s[i:], keepLayout)
		}
		if c < 0x20 || c == 0x7f {
			if keepLayout && (c == '\n' || c == '\t') {
				continue
			}
			return false
		}
	}
	return true
}

func safeSlow(s string, keepLayout bool) bool {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || unsafeRune(r, keepLayout) {
			return false
		}
		i += n
	}
	return true
}

func unsafeRune(r rune, keepLayout bool) bool {
	if keepLayout && (r == '\n' || r == '\t') {
		return false
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}
