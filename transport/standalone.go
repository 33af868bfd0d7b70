package transport

import (
	"bytes"
	"context"
	"mime"
	"net/http"
	"slices"
	"sync"
	"time"
)

// A 2025-11-25 server may send its requests on the standalone stream, the
// SSE stream a client opens with GET on the endpoint (the spec's "listening
// for messages from the server"), rather than on a call's own stream: the
// TypeScript SDK does for a request its tool handler makes without naming
// the related request, and the go-sdk for one made with an unrelated
// context. A session whose client declared a capability (elicitation)
// holds that stream open while tools/call exchanges are in flight: the
// first call opens it (its POST waits until the server answered the GET,
// at most standaloneOpenWait, so that a request the server sends at once
// is not lost), the last one to end closes it. A 405 means the server
// offers none: the session does not ask again.
//
// Each message on it is recorded by, and each server request answered by,
// one in-flight call: the oldest one still in flight (the stream carries
// no related-request id, and the first call started is the one a server
// is most likely still working on). Its frames reach that call's sink
// serialized with the call's own; a call's sink is never handed a frame
// after the call returned.
//
// Bounded: every stream reads at most the response size bound of the
// policy and routes at most standaloneMaxMessages messages; a session
// opens at most standaloneMaxOpens streams.
const (
	standaloneOpenWait    = 2 * time.Second
	standaloneMaxMessages = 64
	standaloneMaxOpens    = 8
)

// standalone is a session's standalone GET stream and the calls it routes to.
type standalone struct {
	mu      sync.Mutex
	calls   []*exchange   // in flight, oldest first
	cancel  func()        // ends the open stream's request
	ready   chan struct{} // closed when the open stream's GET was answered (or failed)
	done    chan struct{} // closed when the open stream's reader ended
	opens   int
	refused bool // the server answered 405, or opens reached standaloneMaxOpens
}

// wantsStandalone reports whether s listens on the standalone stream: a
// 2025-11-25 Streamable HTTP session whose client declared a capability a
// server request could need.
func (s *Session) wantsStandalone() bool {
	return s.proc == nil && !s.stateless() && s.c.cfg.Elicitation
}

// listen registers x (a tools/call) as in flight, opening the standalone
// stream when none is open; the returned func ends the registration and,
// for the last call, closes the stream and waits for its reader.
func (s *Session) listen(x *exchange) func() {
	g := &s.gets
	g.mu.Lock()
	g.calls = append(g.calls, x)
	if g.done == nil && !g.refused && g.opens < standaloneMaxOpens {
		g.opens++
		ctx, cancel := context.WithCancel(context.WithoutCancel(x.ctx))
		g.cancel, g.ready, g.done = cancel, make(chan struct{}), make(chan struct{})
		go s.serveStandalone(ctx, g.ready, g.done)
	}
	ready := g.ready
	g.mu.Unlock()
	if ready != nil {
		t := time.NewTimer(standaloneOpenWait)
		select {
		case <-ready:
		case <-t.C:
		case <-x.ctx.Done():
		}
		t.Stop()
	}
	return func() { s.unlisten(x) }
}

func (s *Session) unlisten(x *exchange) {
	g := &s.gets
	g.mu.Lock()
	g.calls = slices.DeleteFunc(g.calls, func(c *exchange) bool { return c == x })
	var cancel func()
	var done chan struct{}
	if len(g.calls) == 0 && g.done != nil {
		cancel, done = g.cancel, g.done
		g.cancel, g.ready, g.done = nil, nil, nil
	}
	g.mu.Unlock()
	// A message being routed to x finishes first; none comes after.
	x.routeMu.Lock()
	x.unrouted = true
	x.routeMu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

// serveStandalone opens the standalone stream and routes what it carries
// until ctx ends, the stream ends, or a bound is reached.
func (s *Session) serveStandalone(ctx context.Context, ready, done chan struct{}) {
	readyOnce := sync.OnceFunc(func() { close(ready) })
	defer func() {
		readyOnce()
		g := &s.gets
		g.mu.Lock()
		if g.done == done { // ended by the server or a bound: a later call may open another
			g.cancel, g.ready, g.done = nil, nil, nil
		}
		g.mu.Unlock()
		close(done)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.c.url.String(), nil)
	if err != nil {
		return
	}
	if s.setHeaders(req, true) != nil {
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := s.c.http.Do(req)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		if resp.StatusCode == http.StatusMethodNotAllowed {
			s.gets.mu.Lock()
			s.gets.refused = true
			s.gets.mu.Unlock()
		}
		drain(resp)
		return
	}
	readyOnce()
	maxB := int(s.c.maxBytes)
	p := newSSEParser(&limited{r: resp.Body, n: s.c.maxBytes}, maxB, maxB)
	defer p.release()
	for n := 0; n < standaloneMaxMessages; {
		ev, err := p.next()
		if err != nil {
			return
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue // priming event
		}
		n++
		m, err := decodeMessage(ev.Data)
		if err != nil || m.kind() == "response" {
			continue // not ours to take: no request of ours is answered here
		}
		if m.Method == methodToolsListChanged {
			s.toolsChanged.Store(true)
		}
		s.route(ctx, m, eventIDOf(ev))
	}
}

// route hands m to the oldest call in flight: its frame, then (a server
// request) its answer. With no call left, a request is answered as a call
// without a policy would (unrecorded: no call is there to record it).
func (s *Session) route(ctx context.Context, m *message, eventID string) {
	g := &s.gets
	g.mu.Lock()
	var x *exchange
	if len(g.calls) > 0 {
		x = g.calls[0]
		x.routeMu.Lock() // before g.mu is released: unlisten waits for this routing
	}
	g.mu.Unlock()
	if x == nil || x.unrouted {
		if x != nil {
			x.routeMu.Unlock()
		}
		if m.kind() == "server_request" {
			s.answerUnrouted(ctx, m)
		}
		return
	}
	defer x.routeMu.Unlock()
	f := Frame{Dir: "in", Kind: m.kind(), Method: m.Method, ID: m.ID, HTTPStatus: http.StatusOK, EventID: eventID, Body: m.Raw}
	if err := x.emit(f); err != nil {
		return // the call's sink refused: the call fails on its own next frame
	}
	if f.Kind == "server_request" {
		_ = x.answer(m)
	}
}

// answerUnrouted answers a server request no call is there to take, as a
// call without an elicitation policy would (ping: empty; elicitation:
// decline; others: method not found), without recording it.
func (s *Session) answerUnrouted(ctx context.Context, m *message) {
	x := &exchange{s: s, op: m.Method, method: m.Method, ctx: ctx, rctx: ctx, idle: time.AfterFunc(time.Hour, func() {})}
	defer x.idle.Stop()
	_ = x.answer(m)
}
