package vocab

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/jsonscan"
)

// DecodeFrame decodes a frame event's payload. Frames are written by
// Frame.AppendJSON (or encoding/json) as one flat object of plain members,
// so the common case is read by a single scan of the top level with the body
// checked by json.Valid and copied as is; anything else (escapes in a
// string member, an unknown or repeated member, a non-integer number) goes
// to encoding/json, with its errors. Replay reads every frame of a run this way.
func DecodeFrame(e events.Event) (Frame, error) {
	var f Frame
	p, err := e.Plaintext()
	if err != nil {
		return f, err
	}
	if f, ok := scanFrame(p, false); ok {
		return streamEffect(e, f), nil
	}
	err = e.Decode(&f)
	return streamEffect(e, f), err
}

// DecodeFrameHeader is DecodeFrame without the body, which it neither
// reads nor checks when the other members are plain: it only finds where
// the body ends, by its strings and brackets, to read any member after it.
// For readers that route frames, not read them.
func DecodeFrameHeader(e events.Event) (Frame, error) {
	p, err := e.Plaintext()
	if err != nil {
		return Frame{}, err
	}
	if f, ok := scanFrame(p, true); ok {
		return streamEffect(e, f), nil
	}
	f, err := DecodeFrame(e)
	f.Body = nil
	return f, err
}

// scanFrame reads a frame payload; with header set it skips the body
// without reading or checking it, and still reads the members after it
// (frames are written with the body last, but a log may hold one that is
// not, and the header must be what the whole frame says).
func scanFrame(p string, header bool) (f Frame, ok bool) {
	if !utf8.ValidString(p) { // encoding/json would rewrite the bytes; the log never holds such a payload
		return f, false
	}
	i := jsonscan.SkipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return f, false
	}
	var seen uint16
	for i++; ; {
		i = jsonscan.SkipSpace(p, i)
		key, j, ok := jsonscan.PlainString(p, i)
		if !ok {
			return f, false
		}
		i = jsonscan.SkipSpace(p, j)
		if i >= len(p) || p[i] != ':' {
			return f, false
		}
		i = jsonscan.SkipSpace(p, i+1)
		if header && key == "body" { // not read, but what follows it is
			if seen&bodyBit != 0 {
				return f, false
			}
			seen |= bodyBit
			if i, ok = jsonscan.SkipUnchecked(p, i); !ok {
				return f, false
			}
		} else if key == "move" { // a request's or a response's move: decode it alone, not the whole frame
			if seen&moveBit != 0 {
				return f, false
			}
			seen |= moveBit
			if f.Move, i, ok = scanMove(p, i); !ok {
				return f, false
			}
		} else if i, ok = scanMember(&f, key, &seen, p, i); !ok {
			return f, false
		}
		i = jsonscan.SkipSpace(p, i)
		if i >= len(p) {
			return f, false
		}
		switch p[i] {
		case ',':
			i++
		case '}':
			return f, jsonscan.SkipSpace(p, i+1) == len(p)
		default:
			return f, false
		}
	}
}

// scanMember reads the value at p[i:] of the Frame member key into f,
// and where it ends; not ok for a member Frame lacks, a repeated one, or
// a value the plain scan does not take.
func scanMember(f *Frame, key string, seen *uint16, p string, i int) (int, bool) {
	bit, str, num, raw := frameMember(f, key)
	if bit == 0 || *seen&bit != 0 {
		return i, false
	}
	*seen |= bit
	var ok bool
	switch {
	case str != nil:
		*str, i, ok = jsonscan.PlainString(p, i)
	case num != nil:
		*num, i, ok = jsonscan.PlainInt(p, i)
	default:
		var j int
		if j, ok = jsonscan.SkipValue(p, i); ok {
			*raw, i = json.RawMessage(strings.TrimRight(p[i:j], " \t\r\n")), j
		}
	}
	return i, ok
}

// frameMember says where a member of a Frame goes: one of str, num and raw
// is set, and bit tells repeated members apart (0: not a Frame member).
func frameMember(f *Frame, key string) (bit uint16, str *string, num *int, raw *json.RawMessage) {
	switch key {
	case "dir":
		return 1 << 0, &f.Dir, nil, nil
	case "kind":
		return 1 << 1, &f.Kind, nil, nil
	case "method":
		return 1 << 2, &f.Method, nil, nil
	case "id":
		return 1 << 3, nil, nil, &f.ID
	case "httpStatus":
		return 1 << 4, nil, &f.HTTPStatus, nil
	case "eventId":
		return 1 << 5, &f.EventID, nil, nil
	case "remote":
		return 1 << 6, &f.Remote, nil, nil
	case "generation":
		return 1 << 7, nil, &f.Generation, nil
	case "taskId":
		return 1 << 8, &f.TaskID, nil, nil
	case "attempt":
		return 1 << 9, nil, &f.Attempt, nil
	case "effectId":
		return 1 << 10, &f.EffectID, nil, nil
	case "body":
		return bodyBit, nil, nil, &f.Body
	}
	return 0, nil, nil, nil
}

// moveBit tells a repeated "move" member apart (frameMember's bits are 0–11).
const moveBit = 1 << 12

// bodyBit is frameMember's bit for "body".
const bodyBit = 1 << 11

// scanMove reads the move member's value at p[i:], as encoding/json would
// into Frame.Move: null leaves it nil. Only the move's own bytes are
// decoded, so a frame that carries a move keeps the fast scan.
func scanMove(p string, i int) (*Move, int, bool) {
	j, ok := jsonscan.SkipValue(p, i)
	if !ok {
		return nil, i, false
	}
	v := strings.TrimRight(p[i:j], " \t\r\n")
	if v == "null" {
		return nil, j, true
	}
	m := new(Move)
	if !scanMoveObject(v, m) {
		*m = Move{}
		if err := json.Unmarshal([]byte(v), m); err != nil {
			return nil, i, false
		}
	}
	return m, j, true
}

// scanMoveObject reads a move object of plain members (as the log writes
// them) into m; false for anything else (a member Move lacks, a repeated
// one, an escape), which encoding/json then reads.
func scanMoveObject(p string, m *Move) bool {
	i := jsonscan.SkipSpace(p, 0)
	if i >= len(p) || p[i] != '{' {
		return false
	}
	if i = jsonscan.SkipSpace(p, i+1); i < len(p) && p[i] == '}' {
		return jsonscan.SkipSpace(p, i+1) == len(p)
	}
	var seen uint8
	for {
		key, j, ok := jsonscan.PlainString(p, i)
		if !ok {
			return false
		}
		if i = jsonscan.SkipSpace(p, j); i >= len(p) || p[i] != ':' {
			return false
		}
		i = jsonscan.SkipSpace(p, i+1)
		var bit uint8
		var str *string
		var num *int
		switch key {
		case "to":
			bit, str = 1<<0, &m.To
		case "trigger":
			bit, str = 1<<1, &m.Trigger
		case "reason":
			bit, str = 1<<2, &m.Reason
		case "generation":
			bit, num = 1<<3, &m.Generation
		case "redispatches":
			bit, num = 1<<4, &m.Redispatches
		}
		if bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		if str != nil {
			*str, i, ok = jsonscan.PlainString(p, i)
		} else {
			*num, i, ok = jsonscan.PlainInt(p, i)
		}
		if !ok {
			return false
		}
		if i = jsonscan.SkipSpace(p, i); i >= len(p) {
			return false
		}
		switch p[i] {
		case ',':
			i = jsonscan.SkipSpace(p, i+1)
		case '}':
			return jsonscan.SkipSpace(p, i+1) == len(p)
		default:
			return false
		}
	}
}
