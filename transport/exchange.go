package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/internal/canonjson"
)

var (
	errIdleTimeout  = errors.New("no frame received within the inactivity timeout")
	errMaxDuration  = errors.New("request exceeded its maximum duration")
	errStreamEnded  = errors.New("stream ended before the response")
	errTooLarge     = errors.New("response too large")
	errNoResponse   = errors.New("server accepted the request without a response body")
	errSinkRejected = errors.New("sink rejected frame")
)

// exchange is the state of one message sent: its 401 refresh, its stream,
// its resumptions and its timers.
type exchange struct {
	s      *Session
	op     string
	method string
	id     json.RawMessage // nil for a notification
	body   []byte
	sink   Sink

	ctx    context.Context // the caller's
	rctx   context.Context // bounded by Timeout and MaxDuration
	cancel context.CancelCauseFunc
	idle   *time.Timer
	sent   atomic.Bool
	status int
	// elicited counts the elicitation/create requests answered (bounded by maxElicitations).
	elicited atomic.Int32
	// emitMu serializes the sink between the exchange and the standalone
	// stream routing a message to it; routeMu and unrouted end the routing
	// before the exchange returns (standalone.go).
	emitMu   sync.Mutex
	routeMu  sync.Mutex
	unrouted bool

	lastEventID string
	retry       time.Duration

	// 2026-07-28 standard headers: Mcp-Name, and the Mcp-Param-* mirrors
	// of a tools/call's x-mcp-header arguments.
	name   string
	params map[string]string

	// trace is the request's W3C trace context (Config.TraceContext).
	trace [2]string
}

type wireRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method"`
	Params  any             `json:"params,omitempty"`
}

// newID allocates the next JSON-RPC id of the session (integers from 1).
func (s *Session) newID() json.RawMessage {
	return json.RawMessage(strconv.FormatInt(s.c.nextID.Add(1), 10))
}

// roundTrip sends one request with id (a notification when id is nil) and
// returns the response matched by id (nil for a notification).
func (s *Session) roundTrip(ctx context.Context, method string, params any, sink Sink, id json.RawMessage) (*message, error) {
	x := &exchange{s: s, op: method, method: method, sink: sink, ctx: ctx, retry: -1, id: id}
	if s.stateless() {
		if id != nil {
			params = s.withMeta(params)
		}
		x.name, x.params = s.standardHeaders(method, params)
	}
	if id != nil && s.c.cfg.TraceContext != nil {
		params = x.withTrace(params)
	}
	body, err := canonjson.Marshal(wireRequest{JSONRPC: "2.0", ID: x.id, Method: method, Params: params})
	if err != nil {
		return nil, &Error{Op: method, Kind: KindMalformed, Err: fmt.Errorf("encode request: %w", err)}
	}
	x.body = body
	if err := ctx.Err(); err != nil {
		return nil, &Error{Op: method, Kind: ctxKind(err), Err: err}
	}
	rctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	x.rctx, x.cancel = rctx, cancel
	x.idle = time.AfterFunc(s.c.timeout, func() { cancel(errIdleTimeout) })
	defer x.idle.Stop()
	maxT := time.AfterFunc(s.c.maxDuration, func() { cancel(errMaxDuration) })
	defer maxT.Stop()

	if method == "tools/call" && s.wantsStandalone() {
		defer s.listen(x)()
	}
	var m *message
	if s.proc != nil {
		m, err = x.runStdio(params)
	} else {
		m, err = x.run()
	}
	if err == nil {
		return m, nil
	}
	var te *Error
	if !errors.As(err, &te) {
		te = x.classify(err)
	}
	if te.Op == "" || te.Op == "policy" || te.Op == "secret" {
		te.Op = method
	}
	te.Message = s.c.red.string(te.Message)
	te.Err = s.c.red.error(te.Err)
	// On 2026-07-28 over HTTP, closing the response stream (done: the
	// request's context ended) is the cancellation.
	if (te.Kind == KindCancelled || te.Kind == KindTimeout) && te.Sent && x.id != nil && method != "initialize" && (s.proc != nil || !s.stateless()) {
		s.notifyCancelled(ctx, x.id, string(te.Kind), sink)
	}
	return nil, te
}

func ctxKind(err error) Kind {
	if errors.Is(err, context.DeadlineExceeded) {
		return KindTimeout
	}
	return KindCancelled
}

// classify turns a raw error from the exchange into an *Error.
func (x *exchange) classify(err error) *Error {
	e := &Error{Op: x.op, Sent: x.sent.Load(), Status: x.status, Err: err}
	cause := context.Cause(x.rctx)
	switch {
	case errors.Is(err, errSinkRejected):
		e.Kind = KindTransportLoss
	case x.rctx.Err() != nil && (cause == errIdleTimeout || cause == errMaxDuration):
		e.Kind, e.Err = KindTimeout, cause
	case x.ctx.Err() != nil:
		e.Kind, e.Err = ctxKind(x.ctx.Err()), context.Cause(x.ctx)
	case errors.Is(err, errTooLarge), errors.Is(err, errSSELineTooLong), errors.Is(err, errSSEEventTooLong),
		errors.Is(err, errMalformed), errors.Is(err, errNoResponse):
		e.Kind = KindMalformed
	default:
		e.Kind = KindTransportLoss
	}
	return e
}

// emit hands a frame to the sink, redacted; the caller's context is used so
// that our own timers never interrupt persistence, and the inactivity timer
// is paused while the sink works (backpressure is not server inactivity).
func (x *exchange) emit(f Frame) error {
	if x.sink == nil {
		return nil
	}
	f.Body = x.s.c.red.json(f.Body)
	x.emitMu.Lock()
	defer x.emitMu.Unlock()
	x.idle.Stop()
	defer x.idle.Reset(x.s.c.timeout)
	if err := x.sink(x.ctx, f); err != nil {
		return fmt.Errorf("%w (%s %s): %w", errSinkRejected, f.Dir, f.Kind, err)
	}
	return nil
}

func (x *exchange) outFrame() Frame {
	kind := "request"
	if x.id == nil {
		kind = "notification"
	}
	return Frame{Dir: "out", Kind: kind, Method: x.method, ID: x.id, Body: x.body}
}

// run performs the POST, with one credential refresh on 401 and up to
// MaxStepUps re-authorizations on 403 insufficient_scope (with an
// Authorizer). Neither status means the request executed, so the same
// message (same id) is re-sent whatever its idempotency.
func (x *exchange) run() (*message, error) {
	refreshed, stepUps, nonced := false, 0, false
	for {
		x.sent.Store(false)
		if err := x.emit(x.outFrame()); err != nil {
			return nil, err
		}
		resp, err := x.post()
		if err != nil {
			return nil, err
		}
		x.status = resp.StatusCode
		auth := x.s.c.cfg.Authorizer
		switch {
		case resp.StatusCode == http.StatusUnauthorized && auth != nil && !nonced && dpopNonceChallenge(resp.Header):
			// RFC 9449 §9: the server wants a DPoP nonce; the credentials
			// are fine. One re-send with it, outside the refresh budget.
			nonced = true
			if err := x.httpError(resp); err != nil {
				return nil, err
			}
			if err := x.authorize(auth.OnUnauthorized, resp); err != nil {
				return nil, err
			}
			continue
		case resp.StatusCode == http.StatusUnauthorized && !refreshed:
			refreshed = true
			if err := x.httpError(resp); err != nil {
				return nil, err
			}
			if auth != nil {
				if err := x.authorize(auth.OnUnauthorized, resp); err != nil {
					return nil, err
				}
			}
			continue // re-resolve every secret reference and resend the same message, same id
		case resp.StatusCode == http.StatusForbidden && auth != nil && stepUps < MaxStepUps && insufficientScope(resp.Header):
			stepUps++
			if err := x.httpError(resp); err != nil {
				return nil, err
			}
			if err := x.authorize(auth.OnForbidden, resp); err != nil {
				return nil, err
			}
			continue
		}
		return x.handle(resp)
	}
}

// authorize runs an Authorizer's answer to resp's challenge, the
// inactivity timer paused (a login may wait for the user). Its failure is
// KindUnauthorized: the request was refused, not executed; or
// KindPolicyDenied when the network policy refused one of the OAuth
// requests (a challenge naming a refused host).
func (x *exchange) authorize(answer func(context.Context, *http.Response) error, resp *http.Response) error {
	x.idle.Stop()
	err := answer(x.rctx, resp)
	x.idle.Reset(x.s.c.timeout)
	// A login may outlast the server's keep-alive timeout: a pooled
	// connection it closed meanwhile would reset the re-sent request.
	x.s.c.http.CloseIdleConnections()
	if err != nil {
		kind := KindUnauthorized
		if KindOf(err) == KindPolicyDenied {
			kind = KindPolicyDenied
		}
		return &Error{Op: x.op, Kind: kind, Status: resp.StatusCode, Sent: true,
			Message: fmt.Sprintf("http %d: authorization failed", resp.StatusCode), Err: err}
	}
	return nil
}

// dpopNonceChallenge reports a DPoP use_dpop_nonce challenge that carries
// its nonce (RFC 9449 §9).
func dpopNonceChallenge(h http.Header) bool {
	if h.Get("DPoP-Nonce") == "" {
		return false
	}
	for _, v := range h.Values("WWW-Authenticate") {
		if strings.Contains(v, "use_dpop_nonce") {
			return true
		}
	}
	return false
}

// insufficientScope reports whether h's WWW-Authenticate carries
// error="insufficient_scope".
func insufficientScope(h http.Header) bool {
	for _, v := range h.Values("WWW-Authenticate") {
		if strings.Contains(v, "insufficient_scope") {
			return true
		}
	}
	return false
}

func (x *exchange) post() (*http.Response, error) {
	trace := &httptrace.ClientTrace{WroteHeaders: func() { x.sent.Store(true) }}
	req, err := http.NewRequestWithContext(httptrace.WithClientTrace(x.rctx, trace), http.MethodPost, x.s.c.url.String(), bytes.NewReader(x.body))
	if err != nil {
		return nil, &Error{Op: x.op, Kind: KindTransportLoss, Err: err}
	}
	if err := x.s.setHeaders(req, true); err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if x.s.stateless() {
		x.setStandardHeaders(req.Header)
	}
	x.setTraceHeaders(req.Header)
	return x.do(req)
}

func (x *exchange) do(req *http.Request) (*http.Response, error) {
	resp, err := x.s.c.http.Do(req)
	if err != nil {
		var pe *Error
		if errors.As(err, &pe) { // policy refusal from the pinned dialer: nothing sent
			return nil, &Error{Op: x.op, Kind: pe.Kind, Err: pe.Err}
		}
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			x.sent.Store(false)
		} else if x.s.c.injected && x.rctx.Err() == nil {
			x.sent.Store(true) // an injected transport gives no trace: assume the worst
		}
		return nil, err
	}
	x.sent.Store(true)
	return resp, nil
}

// setHeaders sets the headers common to every HTTP request of a session,
// resolving secret references now (never stored).
func (s *Session) setHeaders(req *http.Request, withSecrets bool) error {
	c := s.c
	if withSecrets || req.Method == http.MethodDelete || req.Method == http.MethodGet {
		for name, ref := range c.cfg.Headers {
			v, err := ref.resolve(c.cfg.Policy, c.getenv)
			if err != nil {
				return err
			}
			c.red.add(v)
			req.Header.Set(name, v)
		}
		if c.cfg.Authorizer != nil {
			if err := c.cfg.Authorizer.Authorize(req.Context(), req); err != nil {
				return &Error{Op: "secret", Kind: KindUnauthorized, Message: "authorization failed", Err: err}
			}
			if _, tok, ok := strings.Cut(req.Header.Get("Authorization"), " "); ok {
				c.red.add(tok)
			}
		}
	}
	req.Header.Set("Origin", Origin)
	req.Header.Set("User-Agent", c.userAgent)
	if s.ProtocolVersion != "" {
		req.Header.Set("MCP-Protocol-Version", s.ProtocolVersion)
	}
	if s.sessionID != "" {
		req.Header.Set("MCP-Session-Id", s.sessionID)
	}
	return nil
}

// limited bounds the bytes read from one HTTP response.
type limited struct {
	r io.Reader
	n int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n <= 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	return n, err
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
}

// httpError records a non-2xx response as an "http_error" frame.
func (x *exchange) httpError(resp *http.Response) error {
	defer resp.Body.Close()
	const maxBody = 4 << 10
	b, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	body := json.RawMessage(b)
	if len(b) > maxBody || len(bytes.TrimSpace(b)) == 0 || !utf8.Valid(b) || checkDepth(b) != nil || strictValid(b) != nil { // kept as JSON only when whole and read strictly
		// Cut by the bound: scrubbed whole, then cut, so a secret the
		// bound splits is scrubbed too.
		text := x.s.c.red.cut(string(b), maxBody)
		body, _ = json.Marshal(map[string]any{"status": resp.StatusCode, "text": text})
	}
	return x.emit(Frame{Dir: "in", Kind: "http_error", Method: x.method, ID: x.id, HTTPStatus: resp.StatusCode, Body: body})
}

// notifyCancelled sends a best-effort notifications/cancelled for id,
// bounded to 2s; its outcome is ignored. The frame reaches the sink first.
func (s *Session) notifyCancelled(ctx context.Context, id json.RawMessage, reason string, sink Sink) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNotifyTimeout)
	defer cancel()
	body, err := canonjson.Marshal(wireRequest{JSONRPC: "2.0", Method: "notifications/cancelled",
		Params: map[string]any{"requestId": id, "reason": reason}})
	if err != nil {
		return
	}
	if sink != nil {
		f := Frame{Dir: "out", Kind: "notification", Method: "notifications/cancelled", Body: s.c.red.json(body)}
		if sink(ctx, f) != nil {
			return
		}
	}
	if s.proc != nil {
		s.notifyStdio(ctx, body)
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.c.url.String(), bytes.NewReader(body))
	if err != nil {
		return
	}
	if s.setHeaders(req, true) != nil {
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := s.c.http.Do(req)
	if err != nil {
		return
	}
	drain(resp)
}
