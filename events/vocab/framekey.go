package vocab

import (
	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/jsonscan"
)

// FrameKey is the part of a Frame that says which attempt it belongs to.
type FrameKey struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
}

// DecodeFrameKey reads taskId and attempt from a frame payload. Frames are
// written with those members before "body", so the common case reads a
// short prefix of the payload and never scans the remote body; any payload
// whose top level is not the plain shape this expects (escapes in a key or
// in taskId, a non-integer attempt, duplicates, malformed text) is decoded
// by encoding/json instead, with its errors.
func DecodeFrameKey(e events.Event) (FrameKey, error) {
	p, err := e.Plaintext()
	if err != nil {
		return FrameKey{}, err
	}
	if k, ok := scanFrameKey(p); ok {
		return k, nil
	}
	var k FrameKey
	return k, e.Decode(&k)
}

// scanFrameKey parses the top-level members of the object p up to the
// point where taskId and attempt are both known (or the object ends); ok is
// false whenever it meets anything it does not handle exactly.
func scanFrameKey(p string) (k FrameKey, ok bool) {
	i := jsonscan.SkipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return k, false
	}
	i++
	var haveTask, haveAttempt bool
	for first := true; ; first = false {
		i = jsonscan.SkipSpace(p, i)
		if i >= len(p) {
			return k, false
		}
		if p[i] == '}' {
			if !first { // "{...,}" is not JSON; "{}" and a full object are
				return k, false
			}
			return k, true
		}
		key, j, ok := jsonscan.PlainString(p, i)
		if !ok {
			return k, false
		}
		i = jsonscan.SkipSpace(p, j)
		if i >= len(p) || p[i] != ':' {
			return k, false
		}
		i = jsonscan.SkipSpace(p, i+1)
		switch key {
		case "taskId":
			if haveTask {
				return k, false
			}
			if k.TaskID, i, ok = jsonscan.PlainString(p, i); !ok {
				return k, false
			}
			haveTask = true
		case "attempt":
			if haveAttempt {
				return k, false
			}
			if k.Attempt, i, ok = jsonscan.PlainInt(p, i); !ok {
				return k, false
			}
			haveAttempt = true
		default:
			if i, ok = jsonscan.SkipValue(p, i); !ok {
				return k, false
			}
		}
		if haveTask && haveAttempt {
			return k, true
		}
		i = jsonscan.SkipSpace(p, i)
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
