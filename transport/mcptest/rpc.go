package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// inbound is one POSTed JSON-RPC message, as every handler sees it.
type inbound struct {
	w     http.ResponseWriter
	r     *http.Request
	sid   string
	m     rpcMessage
	tool  string   // tools/call tool name
	fault *Fault   // the fault that fired (never nil once matched; zero = none)
	sess  *session // nil when stateless or for initialize
}

// counter updates the stats for one received message of its method.
type counter func(st *Stats, in *inbound)

// requestHandler answers one request (a message with a method and an id).
type requestHandler func(s *Server, ctx context.Context, sw *streamWriter, in *inbound) (json.RawMessage, *RPCError)

// notificationHandler acts on one notification; the server answers 202.
type notificationHandler func(s *Server, in *inbound)

// counters, requests and notifications are the method tables: one small
// handler per JSON-RPC method. A method in no table is counted as a POST
// only, and a request for it is answered "method not found".
var (
	counters = map[string]counter{
		"initialize":                func(st *Stats, _ *inbound) { st.Initialize++ },
		"notifications/initialized": func(st *Stats, _ *inbound) { st.Initialized++ },
		"tools/list":                func(st *Stats, _ *inbound) { st.List++ },
		"tools/call":                func(st *Stats, in *inbound) { st.Calls[in.tool]++ },
		"notifications/cancelled": func(st *Stats, in *inbound) {
			st.Cancelled++
			st.CancelledIDs = append(st.CancelledIDs, in.cancelledID())
		},
	}
	requests = map[string]requestHandler{
		"initialize": (*Server).serveInitialize,
		"ping": func(*Server, context.Context, *streamWriter, *inbound) (json.RawMessage, *RPCError) {
			return json.RawMessage(`{}`), nil
		},
		"tools/list": func(s *Server, _ context.Context, _ *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
			return s.list(in.sess, in.m.Params)
		},
		"tools/call": func(s *Server, ctx context.Context, sw *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
			return s.call(ctx, sw, in.sess, in.m, in.r.Header)
		},
	}
	notifications = map[string]notificationHandler{
		"notifications/cancelled": (*Server).cancelInflight,
	}
)

// cancelledID is params.requestId of a notifications/cancelled.
func (in *inbound) cancelledID() json.RawMessage {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	_ = json.Unmarshal(in.m.Params, &p)
	return p.RequestID
}

// post serves one POST: decode, count, match faults, check the session,
// then dispatch by kind (client response, notification, request) and method.
func (s *Server) post(w http.ResponseWriter, r *http.Request, sid string) {
	in, ok := readInbound(w, r, sid)
	if !ok {
		return
	}
	s.record(Request{HTTPMethod: "POST", RPCMethod: in.m.Method, ID: in.m.ID, Session: sid, Header: r.Header.Clone()}, in.count)
	f := s.faults.match("POST", in.m.Method, in.tool, sid)
	if f != nil && f.Status != 0 {
		writeStatus(w, f)
		return
	}
	if f == nil {
		f = &Fault{}
	}
	in.fault = f
	if !s.checkSession(in) || !s.checkModernVersion(in) {
		return
	}
	switch {
	case in.m.isResponse():
		s.clientAnswered(in)
	case in.m.ID == nil:
		if h := notifications[in.m.Method]; h != nil && in.sess != nil {
			h(s, in)
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		s.serveRequest(in)
	}
}

// readInbound reads and decodes the POST body; it answers the error itself.
func readInbound(w http.ResponseWriter, r *http.Request, sid string) (*inbound, bool) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return nil, false
	}
	in := &inbound{w: w, r: r, sid: sid}
	if err := json.Unmarshal(body, &in.m); err != nil || in.m.JSONRPC != "2.0" {
		writeJSON(w, http.StatusBadRequest, errorResponse(nil, -32700, "parse error"))
		return nil, false
	}
	if in.m.Method == "tools/call" {
		var p struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(in.m.Params, &p)
		in.tool = p.Name
	}
	return in, true
}

// count updates the stats for in (under the server's lock).
func (in *inbound) count(st *Stats) {
	st.Posts++
	if c := counters[in.m.Method]; c != nil {
		c(st, in)
	}
	if in.m.isResponse() {
		st.Responses = append(st.Responses, clientResponse(in.m, in.sid, in.r.Header))
	}
}

// checkSession finds in's session and checks the protocol version header
// (except for initialize and in stateless mode); it answers the error itself.
func (s *Server) checkSession(in *inbound) bool {
	if in.m.Method == "initialize" || s.opts.Stateless {
		return true
	}
	w := in.w
	if in.sid == "" {
		http.Error(w, "mcptest: missing Mcp-Session-Id", http.StatusBadRequest)
		return false
	}
	s.mu.Lock()
	sess := s.sessions[in.sid]
	if sess != nil {
		sess.posts++
		if s.opts.ExpireAfter > 0 && sess.posts > s.opts.ExpireAfter {
			delete(s.sessions, in.sid)
			sess = nil
		}
	}
	s.mu.Unlock()
	if sess == nil {
		http.Error(w, "mcptest: session not found", http.StatusNotFound)
		return false
	}
	if v := in.r.Header.Get("Mcp-Protocol-Version"); v != s.opts.ProtocolVersion {
		http.Error(w, fmt.Sprintf("mcptest: MCP-Protocol-Version %q, want %q", v, s.opts.ProtocolVersion), http.StatusBadRequest)
		return false
	}
	in.sess = sess
	return true
}

// clientAnswered delivers the client's answer to a server request: 202, no body.
func (s *Server) clientAnswered(in *inbound) {
	s.mu.Lock()
	ch := s.waiters[waiterKey(in.sid, in.m.ID)]
	s.mu.Unlock()
	if ch != nil {
		select { // the first answer to a server request is the one awaited
		case ch <- clientResponse(in.m, in.sid, in.r.Header):
		default:
		}
	}
	in.w.WriteHeader(http.StatusAccepted)
}

// cancelInflight cancels the handler of the request a notifications/cancelled names.
func (s *Server) cancelInflight(in *inbound) {
	id := in.cancelledID()
	s.mu.Lock()
	cancel := in.sess.inflight[string(id)]
	s.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// serveRequest runs a request's handler under the fault's stream actions
// and sends its response (none when the client cancelled it).
func (s *Server) serveRequest(in *inbound) {
	ctx, cancel := context.WithCancel(in.r.Context())
	defer cancel()
	if sess := in.sess; sess != nil {
		id := string(in.m.ID)
		s.mu.Lock()
		if sess.inflight == nil {
			sess.inflight = map[string]context.CancelFunc{}
		}
		sess.inflight[id] = cancel
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(sess.inflight, id)
			s.mu.Unlock()
		}()
	}
	f := in.fault
	sw := s.newWriter(in.w, ctx, f)
	if !sw.applyFault(f) {
		return
	}
	result, rpcErr := s.dispatch(ctx, sw, in)
	if ctx.Err() != nil {
		return // cancelled: no response, as the spec asks
	}
	if err := sw.message(s.response(in.m.ID, result, rpcErr, f)); err == nil && f.HoldAfterResponse && sw.sse {
		<-ctx.Done()
	}
}

// dispatch runs the method's handler.
func (s *Server) dispatch(ctx context.Context, sw *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
	h := requests[in.m.Method]
	if h == nil {
		return nil, &RPCError{Code: -32601, Message: "method not found: " + in.m.Method}
	}
	return h(s, ctx, sw, in)
}

// applyFault performs the fault's stream actions that come before the
// handler (hang, priming event, flood, huge line, close after priming). It
// reports whether the handler should still run.
func (sw *streamWriter) applyFault(f *Fault) bool {
	if f.Hang != nil {
		if sw.sse {
			sw.start()
		}
		select {
		case <-f.Hang:
		case <-sw.ctx.Done():
			return false
		}
	}
	if !sw.sse || !(f.CloseAfterPriming || f.Flood > 0 || f.HugeLine > 0 || f.AfterPriming != nil) {
		return true
	}
	if err := sw.prime(f.Retry); err != nil {
		return false
	}
	if f.AfterPriming != nil {
		if err := sw.raw(f.AfterPriming); err != nil {
			return false
		}
	}
	switch {
	case f.Flood > 0:
		_ = sw.flood(f.Flood)
		return false
	case f.HugeLine > 0:
		_ = sw.hugeLine(f.HugeLine)
		return false
	}
	sw.closed = f.CloseAfterPriming
	return true
}

// serveInitialize opens a session (unless stateless) and answers initialize.
func (s *Server) serveInitialize(_ context.Context, _ *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
	result, sid := s.initialize(in.r.Header)
	if sid != "" {
		in.w.Header().Set("Mcp-Session-Id", sid)
	}
	return result, nil
}
