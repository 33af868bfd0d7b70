package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting of any JSON value accepted from a server.
const maxJSONDepth = 128

// message is one decoded JSON-RPC 2.0 message.
type message struct {
	Raw    json.RawMessage
	ID     json.RawMessage // nil when absent
	Method string
	Params json.RawMessage
	Result json.RawMessage
	Error  *rpcError
}

type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// kind returns the Frame.Kind of an incoming message.
func (m *message) kind() string {
	switch {
	case m.Method != "" && m.ID != nil:
		return "server_request"
	case m.Method != "":
		return "notification"
	}
	return "response"
}

// errMalformed is the root of every malformed-message error.
var errMalformed = errors.New("malformed message")

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errMalformed, fmt.Sprintf(format, args...))
}

// checkDepth reports an error when b nests deeper than maxJSONDepth. It
// assumes nothing about validity; it only tracks brackets outside strings.
func checkDepth(b []byte) error {
	depth, inStr, esc := 0, false, false
	for _, c := range b {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			depth++
			if depth > maxJSONDepth {
				return malformed("JSON nested deeper than %d", maxJSONDepth)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// decodeMessage parses one JSON-RPC message, strictly: a single object,
// "jsonrpc":"2.0", no duplicate members, bounded depth, a valid id type,
// and a response carries exactly one of result and error.
func decodeMessage(b []byte) (*message, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, malformed("empty message")
	}
	if err := checkDepth(b); err != nil {
		return nil, err
	}
	if !utf8.Valid(b) { // RFC 8259 §8.1; encoding/json would accept it and silently rewrite it
		return nil, malformed("invalid UTF-8 at byte %d", invalidUTF8At(b))
	}
	if b[0] != '{' {
		if b[0] == '[' {
			return nil, malformed("JSON-RPC batch is not allowed")
		}
		return nil, malformed("message is not a JSON object")
	}
	if !json.Valid(b) {
		return nil, malformed("invalid JSON")
	}
	m := &message{Raw: json.RawMessage(b)}
	var seen seenKeys
	var version string
	hasVersion, hasResult := false, false
	err := members(b, func(key string, raw json.RawMessage) error {
		if seen.add(key) {
			return malformed("duplicate member %q", key)
		}
		switch key {
		case "jsonrpc":
			hasVersion = true
			if version, _ = jsonString(raw); raw[0] != '"' {
				return malformed("jsonrpc member is not a string")
			}
		case "id":
			if raw[0] != '"' && !isJSONNumber(raw) {
				if string(raw) == "null" {
					return malformed("id is null")
				}
				return malformed("id %s is neither a string nor a number", truncate(string(raw), 64))
			}
			m.ID = raw
		case "method":
			var ok bool
			if m.Method, ok = jsonString(raw); !ok || m.Method == "" {
				return malformed("method is not a non-empty string")
			}
		case "params":
			m.Params = raw
		case "result":
			hasResult = true
			m.Result = raw
		case "error":
			var e rpcError
			if err := json.Unmarshal(raw, &e); err != nil || raw[0] != '{' {
				return malformed("error member is not an error object")
			}
			m.Error = &e
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !hasVersion || version != "2.0" {
		return nil, malformed("jsonrpc version %q, want \"2.0\"", version)
	}
	if m.Method == "" {
		if m.ID == nil {
			return nil, malformed("message has neither method nor id")
		}
		if hasResult == (m.Error != nil) {
			return nil, malformed("response must carry exactly one of result and error")
		}
	}
	return m, nil
}

// invalidUTF8At returns the offset of the first byte that is not valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

func isJSONNumber(raw json.RawMessage) bool {
	_, err := strconv.ParseFloat(string(raw), 64)
	return err == nil && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
}

// sameID compares two JSON-RPC ids: same type and same value.
func sameID(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	if (a[0] == '"') != (b[0] == '"') {
		return false
	}
	if a[0] == '"' {
		var x, y string
		return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && x == y
	}
	x, err1 := strconv.ParseFloat(string(a), 64)
	y, err2 := strconv.ParseFloat(string(b), 64)
	return err1 == nil && err2 == nil && x == y
}

// DecodeResponse parses one message received for the request with id and
// classifies it; it is the function FuzzDecodeResponse exercises. It returns
// the message and whether it is the response to id.
func decodeFor(b []byte, id json.RawMessage) (*message, bool, error) {
	m, err := decodeMessage(b)
	if err != nil {
		return nil, false, err
	}
	if m.kind() != "response" {
		return m, false, nil
	}
	if !sameID(m.ID, id) {
		return m, false, malformed("response id %s does not match request id %s", truncate(string(m.ID), 64), id)
	}
	return m, true, nil
}

// canonicalJSON re-encodes b with sorted object keys, no insignificant
// whitespace, no HTML escaping and numbers exactly as sent.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
