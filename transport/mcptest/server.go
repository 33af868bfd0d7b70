package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// DefaultProtocolVersion is the protocol version the server answers by default.
const DefaultProtocolVersion = "2025-11-25"

// Options configures a Server. The zero value is a stateful SSE server
// answering 2025-11-25 with every tool on one page.
type Options struct {
	ProtocolVersion string // answered to initialize; "" = DefaultProtocolVersion; Protocol20260728 = stateless (modern.go)
	PageSize        int    // tools per tools/list page; 0 = all on one page
	JSONResponse    bool   // answer requests with application/json instead of SSE
	Stateless       bool   // issue no session id and check none
	ExpireAfter     int    // a session answers 404 once it has seen this many POSTs after initialize (a simulated restart); 0 = never
	// ListTTLMs, when set on a 2026-07-28 server, is the ttlMs of every
	// tools/list result (cacheScope "private"); nil sends no hint.
	ListTTLMs *int64

	// Tasks, when set, advertises and serves MCP tasks for tools/call
	// (tasks.go); nil = no tasks capability, params.task is ignored.
	Tasks *TaskOptions

	// Initialize, when set, returns members of the initialize result built
	// from the request's headers (a hostile server echoing a credential);
	// each replaces the default member of its name.
	Initialize func(h http.Header) map[string]any
}

// Request is one HTTP request the server received, for assertions.
type Request struct {
	HTTPMethod  string
	RPCMethod   string
	ID          json.RawMessage
	Session     string
	LastEventID string
	Header      http.Header
}

// ClientResponse is a JSON-RPC response the client POSTed, answering a
// server request (see [Call.Request]).
type ClientResponse struct {
	ID      json.RawMessage
	Session string
	Result  json.RawMessage // nil when the client answered with an error
	Error   *RPCError       // nil when the client answered with a result
	Header  http.Header
}

// Stats counts what the server saw. Counts are of requests received,
// including those answered by a fault; Executed counts handler runs.
type Stats struct {
	Initialize, Initialized, List, Cancelled, Posts, Gets, Deletes int
	Calls, Executed                                                map[string]int // per tool
	CancelledIDs                                                   []json.RawMessage
	BytesWritten                                                   int64
	// Conns counts the TCP connections clients opened to the server.
	Conns     int
	Requests  []Request
	Responses []ClientResponse // POSTed by the client, in arrival order
}

// Server is a deterministic, scriptable MCP server on 127.0.0.1.
type Server struct {
	// URL is the MCP endpoint, e.g. "http://127.0.0.1:41234/mcp".
	URL string

	opts   Options
	ts     *httptest.Server
	faults faults

	mu       sync.Mutex
	tools    []ToolDef
	sessions map[string]*session
	nextSess int
	streams  map[string]*stream
	nextStrm int
	stats    Stats
	waiters  map[string]chan ClientResponse // session + id of a server request → its answer

	tasks taskStore // MCP tasks, when Options.Tasks is set (tasks.go)
}

type session struct {
	id       string
	tools    []ToolDef // snapshot at initialize
	posts    int
	inflight map[string]context.CancelFunc
}

// Start starts a server on 127.0.0.1 serving tools, closed at tb's
// cleanup. At cleanup, every injected fault not marked Optional must have
// fired at least once, or the test fails: a test cannot pass by missing
// its own fault.
func Start(tb testing.TB, opts Options, tools ...ToolDef) *Server {
	tb.Helper()
	s := NewServer(opts, tools...)
	tb.Cleanup(func() {
		s.Close()
		s.CheckFaults(tb)
	})
	return s
}

// CheckFaults fails tb for every injected fault, not marked Optional, that
// never fired. [Start] calls it at cleanup; a test using [NewServer] calls
// it itself. It reports nothing when tb has already failed or was skipped.
func (s *Server) CheckFaults(tb testing.TB) {
	tb.Helper()
	if tb.Failed() || tb.Skipped() {
		return
	}
	for _, f := range s.faults.unfired() {
		tb.Errorf("mcptest: injected fault never fired: %v; fix the test, or set Fault.Optional to the reason it may not fire", &f)
	}
}

// NewServer starts a server on 127.0.0.1 serving tools; call Close when done.
func NewServer(opts Options, tools ...ToolDef) *Server {
	if opts.ProtocolVersion == "" {
		opts.ProtocolVersion = DefaultProtocolVersion
	}
	if opts.ProtocolVersion == Protocol20260728 {
		opts.Stateless = true
	}
	s := &Server{opts: opts, sessions: map[string]*session{}, streams: map[string]*stream{}, waiters: map[string]chan ClientResponse{}}
	s.stats.Calls, s.stats.Executed = map[string]int{}, map[string]int{}
	for _, t := range tools {
		s.AddTool(t)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("mcptest: listen on 127.0.0.1: %v", err))
	}
	s.ts = &httptest.Server{Listener: l, Config: &http.Server{Handler: s, ConnState: func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.stats.Conns++
			s.mu.Unlock()
		}
	}}}
	s.ts.Start()
	s.URL = s.ts.URL + "/mcp"
	return s
}

// Close shuts the server down, cancelling in-flight handlers.
func (s *Server) Close() {
	s.ts.CloseClientConnections()
	s.ts.Close()
}

// Inject arms a fault.
func (s *Server) Inject(f Fault) { s.faults.add(f) }

// AddTool adds or replaces a tool. Sessions snapshot the tool set at
// initialize, so a changed schema is seen by new sessions only.
func (s *Server) AddTool(t ToolDef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.tools {
		if s.tools[i].Name == t.Name {
			s.tools[i] = t
			return
		}
	}
	s.tools = append(s.tools, t)
}

// RemoveTool removes a tool and reports whether it was there. Like a changed
// schema, the removal is seen by new sessions only (sessions snapshot the
// tool set at initialize): after [Server.ExpireSessions], a client that
// reconnects finds the tool missing.
func (s *Server) RemoveTool(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.tools)
	s.tools = slices.DeleteFunc(s.tools, func(t ToolDef) bool { return t.Name == name })
	return len(s.tools) < n
}

// ExpireSessions forgets every session (a simulated restart): they answer
// 404 from now on, and new sessions work.
func (s *Server) ExpireSessions() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.sessions)
}

// Stats returns a copy of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Calls, st.Executed = maps.Clone(s.stats.Calls), maps.Clone(s.stats.Executed)
	st.CancelledIDs = append([]json.RawMessage(nil), s.stats.CancelledIDs...)
	st.Requests = append([]Request(nil), s.stats.Requests...)
	st.Responses = append([]ClientResponse(nil), s.stats.Responses...)
	return st
}

type rpcMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

// isResponse reports whether m is a client's response to a server request.
func (m *rpcMessage) isResponse() bool { return m.Method == "" && m.ID != nil }

// waiterKey identifies a server request by session and compacted id.
func waiterKey(session string, id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return session + "\x00" + string(id)
	}
	return session + "\x00" + b.String()
}

// ServeHTTP implements the Streamable HTTP endpoint.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/mcp" {
		http.NotFound(w, r)
		return
	}
	sid := r.Header.Get("Mcp-Session-Id")
	switch r.Method {
	case http.MethodPost:
		s.post(w, r, sid)
	case http.MethodGet:
		s.get(w, r, sid)
	case http.MethodDelete:
		s.record(Request{HTTPMethod: "DELETE", Session: sid, Header: r.Header.Clone()}, func(st *Stats) { st.Deletes++ })
		if f := s.faults.match("DELETE", "", "", sid); f != nil && f.Status != 0 {
			writeStatus(w, f)
			return
		}
		s.mu.Lock()
		delete(s.sessions, sid)
		s.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
	}
}

func (s *Server) record(req Request, f func(*Stats)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Requests = append(s.stats.Requests, req)
	if f != nil {
		f(&s.stats)
	}
}

func (s *Server) newWriter(w http.ResponseWriter, ctx context.Context, f *Fault) *streamWriter {
	s.mu.Lock()
	s.nextStrm++
	st := &stream{id: "s" + strconv.Itoa(s.nextStrm)}
	s.streams[st.id] = st
	s.mu.Unlock()
	return &streamWriter{w: w, ctx: ctx, sse: !s.opts.JSONResponse, split: f.SplitBytes, gate: f.Gate,
		stream: st, written: &s.stats.BytesWritten, mu: &s.mu}
}

// response renders the response message, applying id faults.
func (s *Server) response(id, result json.RawMessage, rpcErr *RPCError, f *Fault) []byte {
	if f.Body != nil {
		return f.Body
	}
	if f.WrongID {
		id = json.RawMessage(`"mcptest-wrong-id"`)
	}
	var b []byte
	if rpcErr != nil {
		b = errorResponse(id, rpcErr.Code, rpcErr.Message)
		if rpcErr.Data != nil {
			b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": rpcErr.Code, "message": rpcErr.Message, "data": rpcErr.Data}})
		}
	} else {
		b, _ = json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	if f.DuplicateID {
		b = []byte(`{"id":` + string(id) + `,` + strings.TrimPrefix(string(b), "{"))
	}
	return b
}

func clientResponse(m rpcMessage, sid string, h http.Header) ClientResponse {
	cr := ClientResponse{ID: m.ID, Session: sid, Result: m.Result, Header: h.Clone()}
	if m.Error != nil {
		cr.Error = &RPCError{Code: m.Error.Code, Message: m.Error.Message}
	}
	return cr
}

func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
	return b
}

func writeJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) initialize(h http.Header) (json.RawMessage, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sid := ""
	if !s.opts.Stateless {
		s.nextSess++
		sid = fmt.Sprintf("mcptest-session-%d", s.nextSess)
		s.sessions[sid] = &session{id: sid, tools: append([]ToolDef(nil), s.tools...)}
	}
	res := map[string]any{
		"protocolVersion": s.opts.ProtocolVersion,
		"capabilities":    map[string]any{"tools": map[string]any{"listChanged": false}},
		"serverInfo":      map[string]any{"name": "mcptest", "version": "0"},
	}
	if s.opts.Initialize != nil {
		maps.Copy(res, s.opts.Initialize(h))
	}
	b, _ := json.Marshal(res)
	return b, sid
}

// get serves resumption: GET with Last-Event-ID replays the stream's events
// after that id. A GET without it (a standalone stream) is not supported.
// A GET fault with CloseAfterPriming sends only a priming event and closes
// (the stream breaks again), each time it fires.
func (s *Server) get(w http.ResponseWriter, r *http.Request, sid string) {
	last := r.Header.Get("Last-Event-ID")
	s.record(Request{HTTPMethod: "GET", Session: sid, LastEventID: last, Header: r.Header.Clone()}, func(st *Stats) { st.Gets++ })
	f := s.faults.match("GET", "", "", sid)
	if f != nil && f.Status != 0 {
		writeStatus(w, f)
		return
	}
	if last == "" {
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	strmID, nStr, _ := strings.Cut(last, "_")
	n, err := strconv.Atoi(nStr)
	s.mu.Lock()
	st := s.streams[strmID]
	_, live := s.sessions[sid]
	s.mu.Unlock()
	if !s.opts.Stateless && !live {
		http.Error(w, "mcptest: session not found", http.StatusNotFound)
		return
	}
	if st == nil || err != nil {
		http.Error(w, "mcptest: unknown Last-Event-ID", http.StatusBadRequest)
		return
	}
	sw := &streamWriter{w: w, ctx: r.Context(), sse: true, written: &s.stats.BytesWritten, mu: &s.mu, stream: &stream{}}
	sw.start()
	if f != nil && f.CloseAfterPriming {
		// Break again: a priming event repeating the client's Last-Event-ID
		// (nothing is consumed, a later GET resumes from the same point).
		_ = sw.raw([]byte(primingEvent(last, f.Retry)))
		return
	}
	for i, data := range st.after(n) {
		if err := sw.raw([]byte(formatEvent(fmt.Sprintf("%s_%d", st.id, n+1+i), data))); err != nil {
			return
		}
	}
}
