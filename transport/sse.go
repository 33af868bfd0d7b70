package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"
)

// sseEvent is one dispatched server-sent event. Data is empty for priming
// events (an id and/or retry with no data).
type sseEvent struct {
	ID    string        // the last event id seen on the stream so far
	HasID bool          // this event carried an id field
	Event string        // event type, "" = "message"
	Data  []byte        // data lines joined by "\n"; valid until the next call to next
	Retry time.Duration // -1 when the stream has not sent retry yet
}

const utf8BOM = "\xef\xbb\xbf"

var (
	errSSELineTooLong  = errors.New("sse: line too long")
	errSSEEventTooLong = errors.New("sse: event too large")
)

// sseParser is a streaming text/event-stream parser
// (https://html.spec.whatwg.org/multipage/server-sent-events.html). Memory is
// bounded by maxLine and maxEvent whatever the peer sends; lines may end with
// LF, CRLF or a lone CR, and may be split across any read boundary.
type sseParser struct {
	r        io.Reader
	maxLine  int
	maxEvent int

	buf        []byte
	start, end int
	afterCR    bool // the previous line ended with CR: skip one LF
	bomChecked bool
	bomSeen    int // bytes of a leading UTF-8 BOM matched so far (it may span reads)
	rerr       error

	line   []byte
	data   []byte
	hasDat bool
	event  string
	id     string
	hasID  bool
	retry  time.Duration
}

// sseBufSize is the parser's read buffer.
const sseBufSize = 32 << 10

// sseBufs recycles read buffers: a new one per response stream was the
// largest allocation of a call on the client's side (BENCHMARKS.md,
// session 8).
var sseBufs = sync.Pool{New: func() any { b := make([]byte, sseBufSize); return &b }}

func newSSEParser(r io.Reader, maxLine, maxEvent int) *sseParser {
	return &sseParser{r: r, maxLine: maxLine, maxEvent: maxEvent, buf: *sseBufs.Get().(*[]byte), retry: -1}
}

// release gives the read buffer back; p must not be used after it.
func (p *sseParser) release() {
	if p.buf == nil {
		return
	}
	b := p.buf[:sseBufSize]
	p.buf, p.start, p.end = nil, 0, 0
	sseBufs.Put(&b)
}

// readLine returns the next line without its terminator. The slice is reused.
func (p *sseParser) readLine() ([]byte, error) {
	p.line = p.line[:0]
	for {
		for !p.bomChecked && p.start < p.end {
			if p.buf[p.start] != utf8BOM[p.bomSeen] {
				p.line = append(p.line, utf8BOM[:p.bomSeen]...) // not a BOM after all
				p.bomChecked = true
				break
			}
			p.start++
			p.bomSeen++
			p.bomChecked = p.bomSeen == len(utf8BOM)
		}
		for p.start < p.end {
			if p.afterCR {
				p.afterCR = false
				if p.buf[p.start] == '\n' {
					p.start++
					continue
				}
			}
			chunk := p.buf[p.start:p.end]
			i := bytes.IndexAny(chunk, "\r\n")
			if i < 0 {
				if len(p.line)+len(chunk) > p.maxLine {
					return nil, fmt.Errorf("%w (more than %d bytes)", errSSELineTooLong, p.maxLine)
				}
				p.line = append(p.line, chunk...)
				p.start = p.end
				break
			}
			if len(p.line)+i > p.maxLine {
				return nil, fmt.Errorf("%w (more than %d bytes)", errSSELineTooLong, p.maxLine)
			}
			p.line = append(p.line, chunk[:i]...)
			p.afterCR = chunk[i] == '\r'
			p.start += i + 1
			return p.line, nil
		}
		if p.rerr != nil {
			return nil, p.rerr // an unterminated last line is discarded, as the spec says
		}
		n, err := p.r.Read(p.buf)
		p.start, p.end = 0, n
		if err != nil {
			p.rerr = err
		}
	}
}

// next returns the next event. At the end of the stream it returns io.EOF
// (an incomplete trailing event is discarded); other errors come from the
// reader or from the bounds.
func (p *sseParser) next() (sseEvent, error) {
	for {
		line, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if !p.hasDat && !p.hasID && p.event == "" {
				continue // blank line with nothing pending: keep reading
			}
			ev := sseEvent{ID: p.id, HasID: p.hasID, Event: p.event, Data: p.data, Retry: p.retry}
			if len(ev.Data) > 0 && ev.Data[len(ev.Data)-1] == '\n' {
				ev.Data = ev.Data[:len(ev.Data)-1]
			}
			p.data, p.hasDat, p.event, p.hasID = p.data[:0], false, "", false
			return ev, nil
		}
		if line[0] == ':' {
			continue // comment
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if len(p.data)+len(value)+1 > p.maxEvent {
				return sseEvent{}, fmt.Errorf("%w (more than %d bytes)", errSSEEventTooLong, p.maxEvent)
			}
			p.data = append(p.data, value...)
			p.data = append(p.data, '\n')
			p.hasDat = true
		case "event":
			p.event = string(value)
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				p.id, p.hasID = string(value), true
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil && len(value) > 0 && value[0] != '+' {
				p.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}
