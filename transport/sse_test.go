package transport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// recordedStream is a stream as a server may send it: priming event, CRLF
// and lone-CR line ends, comments, multi-line data, event types, retry.
const recordedStream = "\xef\xbb\xbf: keepalive\r\n" +
	"id: s1_0\r\nretry: 1500\r\ndata:\r\n\r\n" +
	"event: message\nid: s1_1\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\n" +
	"data: \"params\":{\"progress\":1}}\n\n" +
	":comment\rid: s1_2\rdata:{\"a\":\"b: c\"}\r\r" +
	"data: no id\n\n" +
	"retry: bogus\nid: bad\x00id\ndata: x\n\n" +
	"data: incomplete event is dropped"

func parseAll(t testing.TB, r io.Reader) []string {
	t.Helper()
	p := newSSEParser(r, 1<<10, 1<<12)
	var out []string
	for {
		ev, err := p.next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("next: %v", err)
		}
		out = append(out, fmt.Sprintf("id=%q has=%v event=%q retry=%v data=%q", ev.ID, ev.HasID, ev.Event, ev.Retry, ev.Data))
	}
}

func TestSSEParser(t *testing.T) {
	got := parseAll(t, strings.NewReader(recordedStream))
	want := []string{
		`id="s1_0" has=true event="" retry=1.5s data=""`,
		`id="s1_1" has=true event="message" retry=1.5s data="{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\n\"params\":{\"progress\":1}}"`,
		`id="s1_2" has=true event="" retry=1.5s data="{\"a\":\"b: c\"}"`,
		`id="s1_2" has=false event="" retry=1.5s data="no id"`,
		`id="s1_2" has=false event="" retry=1.5s data="x"`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// splitReader returns data in two reads split at off.
type splitReader struct {
	parts [][]byte
}

func (r *splitReader) Read(p []byte) (int, error) {
	for len(r.parts) > 0 && len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
	}
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

func TestSSESplitAtEveryOffset(t *testing.T) {
	b := []byte(recordedStream)
	want := parseAll(t, bytes.NewReader(b))
	for off := range len(b) + 1 {
		got := parseAll(t, &splitReader{parts: [][]byte{append([]byte(nil), b[:off]...), append([]byte(nil), b[off:]...)}})
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("split at %d: got %q", off, got)
		}
	}
	if got := parseAll(t, iotest.OneByteReader(bytes.NewReader(b))); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("one byte at a time: got %q", got)
	}
	if got := parseAll(t, iotest.DataErrReader(bytes.NewReader(b))); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("data with EOF: got %q", got)
	}
}

func TestSSEBounds(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  error
	}{
		{"long line", "data: " + strings.Repeat("a", 2000) + "\n\n", errSSELineTooLong},
		{"long line, no newline", strings.Repeat("a", 5000), errSSELineTooLong},
		{"big event", strings.Repeat("data: "+strings.Repeat("a", 500)+"\n", 10) + "\n", errSSEEventTooLong},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newSSEParser(strings.NewReader(tc.input), 1<<10, 1<<12)
			_, err := p.next()
			if !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func FuzzSSE(f *testing.F) {
	f.Add([]byte(recordedStream), 7)
	f.Add([]byte("data: a\r\n\r\n"), 1)
	f.Add([]byte("id: 1\rretry: 10\rdata: x\r\r"), 3)
	f.Fuzz(func(t *testing.T, b []byte, off int) {
		p := newSSEParser(bytes.NewReader(b), 256, 512)
		var whole []string
		var wholeErr error
		for {
			ev, err := p.next()
			if err != nil {
				wholeErr = err
				break
			}
			if len(ev.Data) > 512 {
				t.Fatalf("event of %d bytes over the bound", len(ev.Data))
			}
			whole = append(whole, fmt.Sprintf("%q %q %q %v", ev.ID, ev.Event, ev.Data, ev.Retry))
		}
		if off < 0 {
			off = -off
		}
		if len(b) > 0 {
			off %= len(b) + 1
		} else {
			off = 0
		}
		p = newSSEParser(&splitReader{parts: [][]byte{append([]byte(nil), b[:off]...), append([]byte(nil), b[off:]...)}}, 256, 512)
		for i := 0; ; i++ {
			ev, err := p.next()
			if err != nil {
				if (err == io.EOF) != (wholeErr == io.EOF) || i != len(whole) {
					t.Fatalf("split at %d: stopped after %d events with %v; whole stream %d events with %v", off, i, err, len(whole), wholeErr)
				}
				break
			}
			if got := fmt.Sprintf("%q %q %q %v", ev.ID, ev.Event, ev.Data, ev.Retry); i >= len(whole) || got != whole[i] {
				t.Fatalf("split at %d: event %d = %s", off, i, got)
			}
		}
	})
}
