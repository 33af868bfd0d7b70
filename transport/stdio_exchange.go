package transport

import (
	"context"
	"encoding/json"
	"errors"
)

// runStdio is run for a stdio session: the out frame reaches the sink, the
// message is written as one line, and the lines the reader routes to this
// exchange are handed to the sink one at a time (the reader reads nothing
// more until each is persisted) until the response arrives.
func (x *exchange) runStdio(params any) (*message, error) {
	p := x.s.proc
	if err := p.lost(); err != nil {
		return nil, &Error{Op: x.op, Kind: KindSessionExpired, Err: err, Message: x.s.stderrNote()}
	}
	var w *waiter
	if x.id != nil {
		w = p.register(x.id, progressToken(params))
		defer p.unregister(w)
	}
	for _, f := range p.takeOrphans() { // what arrived while no one listened, first
		if err := x.emit(f); err != nil {
			return nil, err
		}
	}
	if err := x.emit(x.outFrame()); err != nil {
		return nil, err
	}
	x.sent.Store(true)
	if err := p.write(x.rctx, x.body, 0); err != nil {
		return nil, x.stdioLost(err)
	}
	x.idle.Reset(x.s.c.timeout)
	if w == nil {
		return nil, nil
	}
	for {
		select {
		case in := <-w.in:
			m, err := x.take(in)
			close(in.ack)
			if err != nil || m != nil {
				return m, err
			}
		case <-x.rctx.Done():
			return nil, context.Cause(x.rctx)
		case <-p.dead:
			return nil, x.stdioLost(p.lost())
		}
	}
}

// take records one routed line and returns the response when it is ours.
func (x *exchange) take(in incoming) (*message, error) {
	x.idle.Reset(x.s.c.timeout)
	if in.err != nil {
		body, _ := json.Marshal(x.s.c.red.cut(string(in.line), 4<<10))
		_ = x.emit(Frame{Dir: "in", Kind: "response", ID: x.id, Body: body})
		return nil, in.err
	}
	return x.deliver(in.line, "", 0)
}

// stdioLost turns the end of the process (or of its pipes) into the loss
// of the session, with the stderr tail; a lost session after sending is
// ambiguous (KindTransportLoss).
func (x *exchange) stdioLost(err error) error {
	if err == nil {
		err = errProcessGone
	}
	if ctxErr := x.rctx.Err(); ctxErr != nil && !errors.Is(err, errProcessGone) {
		return err // a timeout or cancel while writing: classified by the caller
	}
	return &Error{Op: x.op, Kind: KindTransportLoss, Sent: x.sent.Load(), Err: err, Message: x.s.stderrNote()}
}

// stderrNote quotes the server's stderr tail for an error ("" when empty).
func (s *Session) stderrNote() string {
	if t := s.proc.tail(errTailBytes); t != "" {
		return "stderr: " + t
	}
	return ""
}

// progressToken reads params._meta.progressToken of a request we build.
func progressToken(params any) string {
	m, ok := params.(map[string]any)
	if !ok {
		return ""
	}
	meta, ok := m["_meta"].(map[string]any)
	if !ok {
		return ""
	}
	tok, _ := meta["progressToken"].(string)
	return tok
}

// notifyStdio writes a notification (notifications/cancelled) best-effort.
func (s *Session) notifyStdio(ctx context.Context, body []byte) {
	if s.proc.lost() == nil {
		_ = s.proc.write(ctx, body, cancelNotifyTimeout)
	}
}
