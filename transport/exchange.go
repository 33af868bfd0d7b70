package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
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

// handle interprets a response to the POST.
func (x *exchange) handle(resp *http.Response) (*message, error) {
	code := resp.StatusCode
	if code < 200 || code > 299 {
		if x.s.stateless() && x.id != nil {
			if e := x.rpcErrorBody(resp); e != nil {
				if err := x.httpError(resp); err != nil {
					return nil, err
				}
				return nil, e
			}
		}
		detail := peekDetail(resp, x.s.c.red)
		if err := x.httpError(resp); err != nil {
			return nil, err
		}
		e := &Error{Op: x.op, Kind: KindHTTPStatus, Status: code, Sent: true, Message: detail}
		switch {
		case code == http.StatusUnauthorized:
			e.Kind, e.Message = KindUnauthorized, "server refused the credentials twice"
		case code == http.StatusNotFound && x.s.sessionID != "":
			e.Kind = KindSessionExpired
		case code == http.StatusBadRequest && textVersionRefusal(detail) != nil:
			want := x.s.ProtocolVersion
			if want == "" {
				want = Protocol20251125
			}
			ve := versionRefused(x.s.c, x.op, want, textVersionRefusal(detail))
			ve.Status = code
			return nil, ve
		case code >= 300 && code < 400:
			e.Message = fmt.Sprintf("redirect to %q not followed", resp.Header.Get("Location"))
		}
		return nil, e
	}
	if x.method == "initialize" {
		if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
			if !visibleASCII(sid) {
				resp.Body.Close()
				return nil, malformed("session id is not visible ASCII")
			}
			x.s.sessionID = sid
			// The session id is a bearer credential: a server that quotes
			// it back (in an error message, a result) must not get it into
			// stored or printed text. Only its digest is ever shown.
			if len(sid) >= MinSecretBytes {
				x.s.c.red.add(sid)
			}
		}
	}
	if x.id == nil { // notification: any 2xx will do; the body is ignored
		drain(resp)
		return nil, nil
	}
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		return x.readJSON(resp)
	case "text/event-stream":
		return x.readStream(resp)
	}
	resp.Body.Close()
	if code == http.StatusAccepted || resp.ContentLength == 0 {
		return nil, errNoResponse
	}
	return nil, malformed("unexpected content type %q", resp.Header.Get("Content-Type"))
}

// peekDetail reads a short, printable detail from an error body without
// consuming it for httpError; secrets are scrubbed before the cut.
func peekDetail(resp *http.Response, red *redactor) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), resp.Body))
	var m struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if strictUnmarshal(b, &m) == nil && m.Error.Message != "" {
		return red.cut(m.Error.Message, 256)
	}
	return red.cut(strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, string(b))), 256)
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

func (x *exchange) readJSON(resp *http.Response) (*message, error) {
	defer resp.Body.Close()
	b, err := io.ReadAll(&limited{r: resp.Body, n: x.s.c.maxBytes + 1})
	if err != nil {
		return nil, x.sizeErr(err)
	}
	if int64(len(b)) > x.s.c.maxBytes {
		return nil, x.sizeErr(errTooLarge)
	}
	x.idle.Reset(x.s.c.timeout)
	m, err := x.deliver(b, "", resp.StatusCode)
	if err == nil && m == nil {
		return nil, malformed("JSON body is not the response to request id %s", x.id)
	}
	return m, err
}

func (x *exchange) sizeErr(err error) error {
	if errors.Is(err, errTooLarge) {
		return fmt.Errorf("%w: more than %d bytes", errTooLarge, x.s.c.maxBytes)
	}
	return err
}

// deliver decodes one incoming message, hands it to the sink and returns it
// when it is the response to our request.
func (x *exchange) deliver(b []byte, eventID string, status int) (*message, error) {
	m, isResp, err := decodeFor(b, x.id)
	if err != nil {
		body, _ := json.Marshal(x.s.c.red.cut(string(b), 4<<10))
		_ = x.emit(Frame{Dir: "in", Kind: "response", ID: x.id, HTTPStatus: status, EventID: eventID, Body: body})
		return nil, err
	}
	f := Frame{Dir: "in", Kind: m.kind(), Method: m.Method, ID: m.ID, HTTPStatus: status, EventID: eventID, Body: m.Raw}
	if err := x.emit(f); err != nil {
		return nil, err
	}
	if f.Kind == "server_request" {
		return nil, x.answer(m)
	}
	if m.Method == methodToolsListChanged {
		x.s.toolsChanged.Store(true)
	}
	if !isResp {
		return nil, nil
	}
	if m.Error != nil {
		return nil, x.remoteError(m.Error, status)
	}
	return m, nil
}

// readStream reads an SSE response until our response arrives, resuming
// with GET + Last-Event-ID when the stream ends early after an event id.
func (x *exchange) readStream(resp *http.Response) (*message, error) {
	for resumes := 0; ; resumes++ {
		m, err := x.readEvents(resp)
		if !errors.Is(err, errStreamEnded) || x.rctx.Err() != nil {
			return m, err
		}
		if x.s.stateless() {
			// 2026-07-28 has no resumption: the request is lost, and only
			// the redispatch rules may issue it again (with a new id).
			return nil, fmt.Errorf("%w (2026-07-28: a broken stream loses the request)", errStreamEnded)
		}
		if x.lastEventID == "" {
			return nil, fmt.Errorf("%w (no event id to resume from)", errStreamEnded)
		}
		if resumes >= maxResumes {
			return nil, fmt.Errorf("%w (gave up after %d resumptions)", errStreamEnded, maxResumes)
		}
		if resp, err = x.resume(resumes + 1); err != nil {
			return nil, err
		}
	}
}

func (x *exchange) readEvents(resp *http.Response) (*message, error) {
	defer resp.Body.Close()
	maxB := int(x.s.c.maxBytes)
	p := newSSEParser(&limited{r: resp.Body, n: x.s.c.maxBytes}, maxB, maxB)
	defer p.release()
	for {
		ev, err := p.next()
		if p.retry >= 0 { // a retry field applies when parsed, even in an event with no data that is never dispatched
			x.retry = p.retry
		}
		if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errStreamEnded
		}
		if err != nil {
			return nil, x.sizeErr(err)
		}
		x.idle.Reset(x.s.c.timeout)
		if ev.HasID {
			x.lastEventID = ev.ID
		}
		if len(bytes.TrimSpace(ev.Data)) == 0 {
			continue // priming event
		}
		m, err := x.deliver(ev.Data, eventIDOf(ev), resp.StatusCode)
		if err == nil && m != nil {
			x.drain(resp.Body)
		}
		if err != nil || m != nil {
			return m, err
		}
	}
}

func eventIDOf(ev sseEvent) string {
	if ev.HasID {
		return ev.ID
	}
	return ""
}

// resume waits the server's retry delay (bounded) and reopens the stream
// with GET + Last-Event-ID; attempt counts the resumptions of this exchange
// from 1. Each GET is announced to the sink first as an "out" "resume"
// frame. A 401 re-resolves every secret reference and retries the GET once
// with the same Last-Event-ID; a second 401 is KindUnauthorized, possibly
// executed (the request was accepted). It never resends the request.
func (x *exchange) resume(attempt int) (*http.Response, error) {
	d := x.retry
	if d < 0 {
		d = defaultResumeDelay
	}
	if d > x.s.c.maxResumeDelay {
		d = x.s.c.maxResumeDelay
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-x.rctx.Done():
			t.Stop()
			return nil, context.Cause(x.rctx)
		}
	}
	for refreshed := false; ; refreshed = true {
		req, err := http.NewRequestWithContext(x.rctx, http.MethodGet, x.s.c.url.String(), nil)
		if err != nil {
			return nil, err
		}
		if err := x.s.setHeaders(req, true); err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		req.Header.Set("Last-Event-ID", x.lastEventID)
		if err := x.emit(x.resumeFrame(attempt, refreshed)); err != nil {
			return nil, err
		}
		resp, err := x.s.c.http.Do(req)
		if err != nil {
			return nil, err
		}
		ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
		if resp.StatusCode == http.StatusOK && ct == "text/event-stream" {
			return resp, nil
		}
		x.status = resp.StatusCode
		if err := x.httpError(resp); err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusUnauthorized {
			return nil, fmt.Errorf("%w: resume with Last-Event-ID got http %d %q", errStreamEnded, resp.StatusCode, ct)
		}
		if refreshed {
			return nil, &Error{Op: x.op, Kind: KindUnauthorized, Status: resp.StatusCode, Sent: true, Accepted: true,
				Message: fmt.Sprintf("server refused the credentials twice when resuming the stream (attempt %d)", attempt)}
		}
		if auth := x.s.c.cfg.Authorizer; auth != nil {
			if err := x.authorize(auth.OnUnauthorized, resp); err != nil {
				var te *Error
				if errors.As(err, &te) {
					te.Accepted = true // the request was accepted before its stream broke
				}
				return nil, err
			}
		}
	}
}

// resumeFrame records one GET + Last-Event-ID; credentialRefresh marks the
// retry after a 401.
func (x *exchange) resumeFrame(attempt int, credentialRefresh bool) Frame {
	body, _ := canonjson.Marshal(struct {
		LastEventID       string `json:"lastEventId"`
		Attempt           int    `json:"attempt"`
		CredentialRefresh bool   `json:"credentialRefresh,omitempty"`
	}{x.lastEventID, attempt, credentialRefresh})
	return Frame{Dir: "out", Kind: "resume", Method: x.method, ID: x.id, EventID: x.lastEventID, Body: body}
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
