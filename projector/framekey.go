package projector

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/events"
)

// frameKey is the part of a Frame that says which attempt it belongs to.
type frameKey struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
}

// decodeFrameKey reads taskId and attempt from a frame payload. Frames are
// written with those members before "body", so the common case reads a
// short prefix of the payload and never scans the remote body; any payload
// whose top level is not the plain shape this expects (escapes in a key or
// in taskId, a non-integer attempt, duplicates, malformed text) is decoded
// by encoding/json instead, with its errors.
func decodeFrameKey(e events.Event) (frameKey, error) {
	p, err := e.Plaintext()
	if err != nil {
		return frameKey{}, err
	}
	if k, ok := scanFrameKey(p); ok {
		return k, nil
	}
	var k frameKey
	return k, e.Decode(&k)
}

// scanFrameKey parses the top-level members of the object p up to the
// point where taskId and attempt are both known (or the object ends); ok is
// false whenever it meets anything it does not handle exactly.
func scanFrameKey(p string) (k frameKey, ok bool) {
	i := skipWS(p, 0)
	if i >= len(p) || p[i] != '{' {
		return k, false
	}
	i++
	var haveTask, haveAttempt bool
	for first := true; ; first = false {
		i = skipWS(p, i)
		if i >= len(p) {
			return k, false
		}
		if p[i] == '}' {
			if !first { // "{...,}" is not JSON; "{}" and a full object are
				return k, false
			}
			return k, true
		}
		key, j, ok := plainString(p, i)
		if !ok {
			return k, false
		}
		i = skipWS(p, j)
		if i >= len(p) || p[i] != ':' {
			return k, false
		}
		i = skipWS(p, i+1)
		switch key {
		case "taskId":
			if haveTask {
				return k, false
			}
			if k.TaskID, i, ok = plainString(p, i); !ok {
				return k, false
			}
			haveTask = true
		case "attempt":
			if haveAttempt {
				return k, false
			}
			if k.Attempt, i, ok = plainInt(p, i); !ok {
				return k, false
			}
			haveAttempt = true
		default:
			if i, ok = skipValue(p, i); !ok {
				return k, false
			}
		}
		if haveTask && haveAttempt {
			return k, true
		}
		i = skipWS(p, i)
		if i >= len(p) {
			return k, false
		}
		switch p[i] {
		case ',':
			i++
		case '}':
			return k, true
		default:
			return k, false
		}
	}
}

func skipWS(p string, i int) int {
	for i < len(p) && (p[i] == ' ' || p[i] == '\t' || p[i] == '\n' || p[i] == '\r') {
		i++
	}
	return i
}

// plainString reads a JSON string without escapes or control bytes at i.
func plainString(p string, i int) (string, int, bool) {
	if i >= len(p) || p[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(p); j++ {
		switch c := p[j]; {
		case c == '"':
			return p[i+1 : j], j + 1, true
		case c == '\\' || c < 0x20:
			return "", i, false
		}
	}
	return "", i, false
}

// plainInt reads a JSON integer at i that encoding/json would decode into
// an int the same way (no fraction, exponent or leading zero), followed by a
// delimiter.
func plainInt(p string, i int) (int, int, bool) {
	j := i
	for j < len(p) && (p[j] >= '0' && p[j] <= '9' || p[j] == '-') {
		j++
	}
	n, err := strconv.Atoi(p[i:j])
	if err != nil || j >= len(p) || strings.IndexByte(",} \t\r\n", p[j]) < 0 || (j-i > 1 && p[i] == '0') {
		return 0, i, false
	}
	return n, j, true
}

// skipValue skips one JSON value at i, checking it with encoding/json.
func skipValue(p string, i int) (int, bool) {
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
				return finishValue(p, i, j)
			}
			depth--
		case ',':
			if depth == 0 {
				return finishValue(p, i, j)
			}
		}
		if depth == 0 && j+1 < len(p) && (p[j] == '"' || p[j] == '}' || p[j] == ']') {
			return finishValue(p, i, j+1)
		}
	}
	return i, false
}

func finishValue(p string, i, j int) (int, bool) {
	if !json.Valid([]byte(p[i:j])) {
		return i, false
	}
	return j, true
}
