package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/agentctl/agentctl/internal/jsonscan"
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

// decodeMessage parses one JSON-RPC message, strictly: a single object in
// valid UTF-8, "jsonrpc":"2.0", bounded depth, no member name repeated at
// any depth (strictValid), member names matched exactly, a valid id type,
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
	if err := strictValid(b); err != nil {
		return nil, err
	}
	m := &message{Raw: json.RawMessage(b)}
	var version string
	hasVersion, hasResult := false, false
	err := jsonscan.Members(b, func(key string, raw []byte) error {
		switch key {
		case "jsonrpc":
			hasVersion = true
			if version, _ = jsonscan.String(raw); raw[0] != '"' {
				return malformed("jsonrpc member is not a string")
			}
		case "id":
			if raw[0] != '"' && raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
				if string(raw) == "null" {
					return malformed("id is null")
				}
				return malformed("id %s is neither a string nor a number", truncate(string(raw), 64))
			}
			m.ID = raw
		case "method":
			var ok bool
			if m.Method, ok = jsonscan.String(raw); !ok || m.Method == "" {
				return malformed("method is not a non-empty string")
			}
		case "params":
			m.Params = raw
		case "result":
			hasResult = true
			m.Result = raw
		case "error":
			var e rpcError
			if err := strictUnmarshal(raw, &e); err != nil || raw[0] != '{' {
				return malformed("error member is not an error object")
			}
			m.Error = &e
		}
		return nil
	})
	if errors.Is(err, jsonscan.ErrSyntax) {
		return nil, malformed("%v", err)
	}
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

// sameID reports whether the response id a is the request id b exactly as
// sent: a number by its token, byte for byte (3.0 and 3.0000000000000001 are
// not 3), a string by its decoded value (a server may escape it otherwise).
// Both are tokens of valid JSON.
func sameID(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if len(a) == 0 || len(b) == 0 || (a[0] == '"') != (b[0] == '"') {
		return false
	}
	if a[0] != '"' {
		return bytes.Equal(a, b)
	}
	x, okx := jsonscan.String(a)
	y, oky := jsonscan.String(b)
	return okx && oky && x == y
}

// decodeFor parses one message received for the request with id and
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

// truncate cuts s to at most n bytes, marking a cut with "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
