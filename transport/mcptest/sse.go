package mcptest

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// streamWriter writes one HTTP response as SSE (or one JSON body), with the
// fault's byte splitting and gating, and records SSE events for resumption.
type streamWriter struct {
	w       http.ResponseWriter
	ctx     context.Context
	sse     bool
	split   bool
	gate    <-chan struct{}
	stream  *stream
	events  int
	started bool
	written *int64 // server-wide byte counter (guarded by mu)
	mu      *sync.Mutex
	closed  bool // CloseAfterPriming: record, but write nothing more
}

// stream is the event log of one SSE stream, kept for GET resumption.
type stream struct {
	id     string
	mu     sync.Mutex
	events []string // event i has id "<stream id>_<i>"
}

func (s *stream) add(data string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, data)
	return len(s.events) - 1
}

func (s *stream) after(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n+1 > len(s.events) {
		return nil
	}
	return append([]string(nil), s.events[n+1:]...)
}

func (sw *streamWriter) start() {
	if sw.started {
		return
	}
	sw.started = true
	if sw.sse {
		sw.w.Header().Set("Content-Type", "text/event-stream")
		sw.w.Header().Set("Cache-Control", "no-cache")
	} else {
		sw.w.Header().Set("Content-Type", "application/json")
	}
	sw.w.WriteHeader(http.StatusOK)
	if f, ok := sw.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (sw *streamWriter) raw(b []byte) error {
	sw.start()
	f, _ := sw.w.(http.Flusher)
	chunks := [][]byte{b}
	if sw.split {
		chunks = chunks[:0]
		for i := range b {
			chunks = append(chunks, b[i:i+1])
		}
	}
	for _, c := range chunks {
		n, err := sw.w.Write(c)
		sw.mu.Lock()
		*sw.written += int64(n)
		sw.mu.Unlock()
		if err != nil {
			return err
		}
		if f != nil && (sw.split || sw.sse) {
			f.Flush()
		}
	}
	return sw.ctx.Err()
}

// prime sends the priming event: an id, an optional retry, empty data.
func (sw *streamWriter) prime(retryMS int) error {
	n := sw.stream.add("")
	sw.events++
	return sw.raw([]byte(primingEvent(fmt.Sprintf("%s_%d", sw.stream.id, n), retryMS)))
}

func primingEvent(id string, retryMS int) string {
	var b strings.Builder
	b.WriteString("id: " + id + "\n")
	if retryMS > 0 {
		fmt.Fprintf(&b, "retry: %d\n", retryMS)
	}
	b.WriteString("data: \n\n")
	return b.String()
}

// message sends one JSON-RPC message: an SSE event, or the JSON body.
func (sw *streamWriter) message(data []byte) error {
	if !sw.sse {
		return sw.raw(data)
	}
	n := sw.stream.add(string(data))
	if sw.closed {
		return nil
	}
	if sw.events > 0 && sw.gate != nil {
		sw.start()
		select {
		case <-sw.gate:
		case <-sw.ctx.Done():
			return sw.ctx.Err()
		}
	}
	sw.events++
	return sw.raw([]byte(formatEvent(fmt.Sprintf("%s_%d", sw.stream.id, n), string(data))))
}

func formatEvent(id, data string) string {
	var b strings.Builder
	b.WriteString("id: " + id + "\n")
	for line := range strings.SplitSeq(data, "\n") {
		b.WriteString("data: " + line + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

// flood streams n bytes of log notifications, generated lazily.
func (sw *streamWriter) flood(n int64) error {
	ev := []byte("event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"" +
		strings.Repeat("x", 900) + "\"}}\n\n")
	for sent := int64(0); sent < n; sent += int64(len(ev)) {
		if err := sw.raw(ev); err != nil {
			return err
		}
	}
	return nil
}

// hugeLine streams one data line of n bytes, generated lazily.
func (sw *streamWriter) hugeLine(n int64) error {
	if err := sw.raw([]byte("data: ")); err != nil {
		return err
	}
	chunk := []byte(strings.Repeat("a", 32<<10))
	for sent := int64(0); sent < n; sent += int64(len(chunk)) {
		if err := sw.raw(chunk); err != nil {
			return err
		}
	}
	return sw.raw([]byte("\n\n"))
}
