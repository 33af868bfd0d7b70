// Package jsonscan finds members and value boundaries in JSON text in one
// pass, without decoding it: agentctl's one hand-written JSON scanner, kept
// for the two hot paths where encoding/json cost more than everything else
// (transport's read of every message a server sends, projector's read of
// every frame in the log). FuzzScan holds every function to encoding/json.
//
// Its functions come in two contracts, named so a call site says which it
// relies on:
//
//   - Valid input (ValueEnd, StringEnd, Members): the text is already known
//     to be one valid JSON value in valid UTF-8; they only find boundaries and
//     never check anything. Transport validates a message strictly first.
//   - Any input (PlainString, PlainInt, SkipValue): the text may be anything;
//     each returns ok=false as soon as it meets what it does not handle
//     exactly as encoding/json would, and the caller falls back to
//     encoding/json. Projector reads frame payloads this way.
//
// Both work on string and []byte (Text), so neither caller copies.
package jsonscan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Text is what the scanner reads: a string or a byte slice.
type Text interface{ ~string | ~[]byte }

// ErrSyntax is the root of the errors Members returns for text that breaks
// its valid-input contract.
var ErrSyntax = errors.New("jsonscan: not valid JSON")

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace.
func SkipSpace[T Text](p T, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

// StringEnd returns the index just past the string that starts at p[i].
// Valid input only.
func StringEnd[T Text](p T, i int) int {
	for j := i + 1; j < len(p); j++ {
		switch p[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(p)
}

// ValueEnd returns the index just past the value that starts at p[i].
// Valid input only.
func ValueEnd[T Text](p T, i int) int {
	if i >= len(p) {
		return len(p)
	}
	switch p[i] {
	case '"':
		return StringEnd(p, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(p); j++ {
			switch p[j] {
			case '"':
				j = StringEnd(p, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(p)
	}
	j := i
	for j < len(p) && p[j] != ',' && p[j] != '}' && p[j] != ']' && p[j] != ' ' && p[j] != '\t' && p[j] != '\n' && p[j] != '\r' {
		j++
	}
	return j
}

// Members calls fn with the name (escapes decoded) and raw value of each
// member of the object b, in order, and stops at fn's first error, which it
// returns as is. Valid input only: b is one valid JSON object in valid UTF-8
// whose first byte is '{'. One pass, no allocation but the names.
func Members(b []byte, fn func(name string, raw []byte) error) error {
	i := SkipSpace(b, 1)
	if i >= len(b) || b[i] == '}' {
		return nil
	}
	for i < len(b) {
		end := StringEnd(b, i)
		name, ok := String(b[i:end])
		if !ok {
			return fmt.Errorf("%w: member name %.64q", ErrSyntax, b[i:end])
		}
		i = SkipSpace(b, SkipSpace(b, end)+1) // past ':'
		vend := ValueEnd(b, i)
		if err := fn(name, b[i:vend]); err != nil {
			return err
		}
		i = SkipSpace(b, vend)
		if i >= len(b) || b[i] == '}' {
			return nil
		}
		i = SkipSpace(b, i+1) // past ','
	}
	return nil
}

// String decodes the raw JSON string token raw; ok is false if raw is not one.
func String(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), true
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", false
	}
	return s, true
}

// PlainString reads a JSON string at p[i] that has no escapes and no
// control bytes, returning its contents (a subslice of p) and the index past
// it; ok is false for anything else. Any input; the contents are returned
// as they are, which is what encoding/json decodes when they are valid UTF-8
// (it would replace invalid bytes with U+FFFD).
func PlainString[T Text](p T, i int) (s T, end int, ok bool) {
	if i >= len(p) || p[i] != '"' {
		return s, i, false
	}
	for j := i + 1; j < len(p); j++ {
		switch c := p[j]; {
		case c == '"':
			return p[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return s, i, false
		}
	}
	return s, i, false
}

// PlainInt reads a JSON integer at p[i] that encoding/json would decode
// into an int the same way (no fraction, exponent or leading zero, in
// range), followed by a delimiter (',', '}' or whitespace); ok is false for
// anything else. Any input.
func PlainInt[T Text](p T, i int) (n, end int, ok bool) {
	j := i
	for j < len(p) && (p[j] >= '0' && p[j] <= '9' || p[j] == '-') {
		j++
	}
	d := i // the first digit
	if d < j && p[d] == '-' {
		d++
	}
	if j == i || j >= len(p) || !intDelim(p[j]) || (j-d > 1 && p[d] == '0') {
		return 0, i, false
	}
	n, err := strconv.Atoi(string(p[i:j]))
	if err != nil {
		return 0, i, false
	}
	return n, j, true
}

func intDelim(c byte) bool {
	return c == ',' || c == '}' || c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

// SkipValue skips the one JSON value at p[i] and checks it with
// encoding/json; end is where the value stops (a scalar's end may include
// the whitespace after it). ok is false when the text there is not one
// valid JSON value followed by a delimiter. Any input.
func SkipValue[T Text](p T, i int) (end int, ok bool) {
	j, ok := skip(p, i)
	if !ok {
		return i, false
	}
	return checked(p, i, j)
}

// SkipUnchecked is SkipValue without the check: it finds where the value
// at p[i] stops by its strings and brackets alone, for a reader that must
// know what follows a value it does not read. A value it takes may still
// be invalid JSON. Any input.
func SkipUnchecked[T Text](p T, i int) (end int, ok bool) {
	return skip(p, i)
}

// skip is where the value at p[i] stops, by strings and brackets.
func skip[T Text](p T, i int) (int, bool) {
	depth, j := 0, i
	for ; j < len(p); j++ {
		switch p[j] {
		case '"':
			j++
			for j < len(p) && p[j] != '"' {
				if p[j] == '\\' {
					j++
				}
				j++
			}
			if j >= len(p) {
				return i, false
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return j, true
			}
			depth--
		case ',':
			if depth == 0 {
				return j, true
			}
		}
		if depth == 0 && j+1 < len(p) && (p[j] == '"' || p[j] == '}' || p[j] == ']') {
			return j + 1, true
		}
	}
	return i, false
}

func checked[T Text](p T, i, j int) (int, bool) {
	if !json.Valid([]byte(p[i:j])) {
		return i, false
	}
	return j, true
}
