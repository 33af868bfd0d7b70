package transport

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// MinSecretBytes is the shortest secret value accepted: a shorter value
// cannot be masked without corrupting data (a secret "true" or "e" would
// match all over a result), so it is refused when resolved.
const MinSecretBytes = 8

// cutMark ends every text cut by a bound (see truncate); a secret prefix
// of at least MinSecretBytes right before it is a secret cut in half.
const cutMark = "…"

// redactor remembers every secret value resolved by a client, so that it can
// be scrubbed from anything handed to a sink or put in an error.
//
// It matches on decoded text: JSON escape sequences (\/, \uXXXX, surrogate
// pairs, \", ...) are decoded in a view of the text before searching, and
// a match is replaced in the original bytes, so every escaped spelling of a
// secret is found. In JSON it scrubs string values only, never member
// names, numbers or literals, so the document keeps its meaning and its
// validity. A secret prefix of MinSecretBytes or more that ends right at a
// cut (cutMark) is scrubbed too.
type redactor struct {
	mu     sync.Mutex
	values []string // longest first, decoded
}

func (r *redactor) add(v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	forms := []string{v}
	// The token of "Bearer xyz" alone is as secret as the whole value.
	if f := strings.Fields(v); len(f) > 1 && len(f[len(f)-1]) >= MinSecretBytes {
		forms = append(forms, f[len(f)-1])
	}
	for _, s := range forms {
		if s != "" && !slices.Contains(r.values, s) {
			r.values = append(r.values, s)
		}
	}
	sort.Slice(r.values, func(i, j int) bool { return len(r.values[i]) > len(r.values[j]) })
}

func (r *redactor) snapshot() []string {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.values
}

// string scrubs text meant for a human or an error (not JSON-aware: every
// escaped or plain occurrence is replaced).
func (r *redactor) string(s string) string {
	vals := r.snapshot()
	if len(vals) == 0 {
		return s
	}
	return scrub(s, vals)
}

// cut scrubs s and then bounds it to n bytes (plus cutMark), scrubbing
// any secret prefix the cut leaves at the end: redaction before truncation.
func (r *redactor) cut(s string, n int) string {
	return r.string(truncate(r.string(s), n))
}

// json scrubs the string values of a JSON document; member names, numbers
// and literals are never touched, so valid JSON stays valid. Bytes that
// are not valid JSON are scrubbed as text and, when anything was
// scrubbed, returned as one JSON string.
func (r *redactor) json(b []byte) json.RawMessage {
	vals := r.snapshot()
	if len(vals) == 0 || len(b) == 0 || !suspect(b, vals) {
		return slices.Clone(b) // b may be a reused read buffer
	}
	if !json.Valid(b) {
		s := scrub(string(b), vals)
		if s == string(b) {
			return slices.Clone(b)
		}
		q, _ := json.Marshal(s)
		return q
	}
	return scrubJSON(b, vals, 0)
}

// error scrubs err's message; the result keeps err in its chain only when
// nothing had to be scrubbed.
func (r *redactor) error(err error) error {
	if err == nil || r == nil {
		return err
	}
	msg := err.Error()
	if red := r.string(msg); red != msg {
		return redactedError(red)
	}
	return err
}

type redactedError string

func (e redactedError) Error() string { return string(e) }

// maxNestedJSON bounds how many times a string value that is itself
// escaped text (JSON in a string in JSON) is decoded again.
const maxNestedJSON = 3

// scrubJSON copies a valid JSON document, scrubbing each string value.
func scrubJSON(b []byte, vals []string, level int) []byte {
	var out []byte
	last := 0
	var objects []bool // container stack: true = object
	expectKey := false
	for i := 0; i < len(b); {
		switch c := b[i]; c {
		case '{':
			objects = append(objects, true)
			expectKey = true
		case '[':
			objects = append(objects, false)
			expectKey = false
		case '}', ']':
			objects = objects[:len(objects)-1]
		case ',':
			expectKey = len(objects) > 0 && objects[len(objects)-1]
		case ':':
			expectKey = false
		case '"':
			end := redactStringEnd(b, i)
			if !expectKey {
				if tok := scrubToken(b[i:end], vals, level); tok != nil {
					out = append(append(out, b[last:i]...), tok...)
					last = end
				}
			}
			i = end
			continue
		}
		i++
	}
	if out == nil {
		return slices.Clone(b)
	}
	return append(out, b[last:]...)
}

// redactStringEnd returns the offset just past the JSON string starting at b[i].
func redactStringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// scrubToken returns the scrubbed form of one JSON string token (quotes
// included), or nil when nothing had to change.
func scrubToken(tok []byte, vals []string, level int) []byte {
	if !suspect(tok, vals) {
		return nil
	}
	inner := string(tok[1 : len(tok)-1])
	red := scrub(inner, vals)
	if red != inner {
		return []byte(`"` + red + `"`)
	}
	if level >= maxNestedJSON || !strings.Contains(inner, `\`) {
		return nil
	}
	// The decoded value may itself carry escapes (JSON text in a string):
	// scrub one level down and re-encode when that found something.
	var dec string
	if json.Unmarshal(tok, &dec) != nil {
		return nil
	}
	var red2 string
	if json.Valid([]byte(dec)) {
		red2 = string(scrubJSON([]byte(dec), vals, level+1))
	} else {
		red2 = scrub(dec, vals)
	}
	if red2 == dec {
		return nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(red2)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// scrub replaces, in s, every occurrence of a value as it reads once the
// JSON escape sequences of s are decoded, and every prefix of a value of
// at least MinSecretBytes that ends right before cutMark.
func scrub(s string, vals []string) string {
	if !strings.Contains(s, `\`) && !strings.Contains(s, cutMark) && !containsAny(s, vals) {
		return s // the common case: nothing escaped, nothing cut, no value
	}
	dec, off := decodedView(s)
	type span struct{ from, to int }
	var spans []span
	covered := func(p int) bool {
		for _, sp := range spans {
			if p >= sp.from && p < sp.to {
				return true
			}
		}
		return false
	}
	for _, v := range vals { // longest first: a shorter form inside a longer one is already covered
		for p := 0; ; {
			k := strings.Index(dec[p:], v)
			if k < 0 {
				break
			}
			if !covered(p + k) {
				spans = append(spans, span{p + k, p + k + len(v)})
			}
			p += k + 1
		}
	}
	for p := 0; ; {
		k := strings.Index(dec[p:], cutMark)
		if k < 0 {
			break
		}
		at := p + k
		for _, v := range vals {
			for n := min(len(v)-1, at); n >= MinSecretBytes; n-- {
				if strings.HasSuffix(dec[:at], v[:n]) && !covered(at-n) {
					spans = append(spans, span{at - n, at})
					break
				}
			}
		}
		p = at + len(cutMark)
	}
	if len(spans) == 0 {
		return s
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var b strings.Builder
	last := 0
	for _, sp := range spans {
		from, to := sp.from, sp.to
		if off != nil {
			from, to = off[from], off[to]
		}
		if from < last {
			from = last
		}
		if to <= from {
			continue
		}
		b.WriteString(s[last:from])
		b.WriteString(Redacted)
		last = to
	}
	b.WriteString(s[last:])
	return b.String()
}

// suspect reports whether b may hold a value: escaped (any backslash),
// cut (cutMark) or in plain text. Most frames are not, and skip the scan.
func suspect(b []byte, vals []string) bool {
	if bytes.IndexByte(b, '\\') >= 0 || bytes.Contains(b, []byte(cutMark)) {
		return true
	}
	for _, v := range vals {
		if bytes.Contains(b, []byte(v)) {
			return true
		}
	}
	return false
}

func containsAny(s string, vals []string) bool {
	for _, v := range vals {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

// decodedView decodes every JSON escape sequence of s (wherever it
// appears: the text may be a string value, a raw body or an error message)
// and returns the decoded text with, for each of its bytes, the offset in
// s where the escape or byte producing it starts (plus len(s) at the end);
// the offsets are nil when s has no escape (the identity).
func decodedView(s string) (string, []int) {
	if !strings.Contains(s, `\`) {
		return s, nil // identity: no offsets to keep
	}
	var b []byte
	off := make([]int, 0, len(s)+1)
	emit := func(from int, p ...byte) {
		for range p {
			off = append(off, from)
		}
		b = append(b, p...)
	}
	for i := 0; i < len(s); {
		if s[i] != '\\' || i+1 >= len(s) {
			emit(i, s[i])
			i++
			continue
		}
		switch c := s[i+1]; c {
		case '"', '\\', '/':
			emit(i, c)
			i += 2
		case 'b', 'f', 'n', 'r', 't':
			emit(i, map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[c])
			i += 2
		case 'u':
			r, n := decodeU(s[i:])
			if n == 0 {
				emit(i, s[i])
				i++
				continue
			}
			emit(i, utf8.AppendRune(nil, r)...)
			i += n
		default:
			emit(i, s[i])
			i++
		}
	}
	return string(b), append(off, len(s))
}

// decodeU decodes a \uXXXX escape (or a surrogate pair of two) at the
// start of s, returning the rune and the bytes consumed (0 when invalid).
func decodeU(s string) (rune, int) {
	hex := func(t string) (rune, bool) {
		if len(t) < 6 || t[0] != '\\' || t[1] != 'u' {
			return 0, false
		}
		v, err := strconv.ParseUint(t[2:6], 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex(s)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex(s[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}
