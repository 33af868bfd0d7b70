package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// Reading an exchange's answer: a JSON body or an SSE stream, its size
// bounded, and resuming a stream that broke.

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
