package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strconv"
)

// ToolDef is one tool the server offers.
type ToolDef struct {
	Name, Title, Description string
	InputSchema              json.RawMessage // nil = {"type":"object"}; use OmitInputSchema to send none
	OmitInputSchema          bool            // list the tool without an inputSchema (a broken server)
	OutputSchema             json.RawMessage
	Annotations              json.RawMessage
	Execution                json.RawMessage
	// Extra holds more members of the tool object as listed (icons,
	// _meta, ...); a member named here replaces the one above.
	Extra   map[string]any
	Handler Handler // nil = answer a text content "ok"
}

// Handler executes one tools/call. Returning an *RPCError answers with that
// JSON-RPC error; any other error becomes an isError result.
type Handler func(ctx context.Context, c *Call) (*Result, error)

// Call is what a Handler sees of one tools/call.
type Call struct {
	Tool          string
	ID            json.RawMessage // the JSON-RPC id of the tools/call request
	Arguments     json.RawMessage
	Meta          json.RawMessage // params._meta as sent
	ProgressToken json.RawMessage // params._meta.progressToken, nil when absent
	Header        http.Header     // the HTTP request headers
	Session       string          // MCP-Session-Id ("" when stateless)

	sw  *streamWriter
	srv *Server
}

// Notify sends a notification on the response stream before the result
// (SSE only; dropped in JSON mode). It returns once the bytes are flushed.
func (c *Call) Notify(method string, params any) error {
	if !c.sw.sse {
		return nil
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
	if err != nil {
		return err
	}
	return c.sw.message(b)
}

// Progress sends notifications/progress for the call's progress token.
func (c *Call) Progress(progress, total float64, message string) error {
	p := map[string]any{"progressToken": c.ProgressToken, "progress": progress}
	if total > 0 {
		p["total"] = total
	}
	if message != "" {
		p["message"] = message
	}
	return c.Notify("notifications/progress", p)
}

// Result is a tools/call result.
type Result struct {
	Content           any  // nil = [] (or a text "ok" when the handler is nil)
	StructuredContent any  // omitted when nil
	IsError           bool // tool-level failure
	// Raw, when set, is sent verbatim as the result object (e.g. with JSON
	// escapes a Go encoder never writes); the other fields are ignored.
	Raw json.RawMessage
}

// RPCError is a JSON-RPC error a Handler may return.
type RPCError struct {
	Code    int
	Message string
	Data    json.RawMessage // error.data; omitted when nil
}

func (e *RPCError) Error() string { return "rpc error " + strconv.Itoa(e.Code) + ": " + e.Message }

// Text returns a content list with one text block.
func Text(s string) []map[string]any { return []map[string]any{{"type": "text", "text": s}} }

// EchoHeaders is a tool whose structured result is the request headers it
// received (canonical names, first values).
func EchoHeaders(name string) ToolDef {
	return ToolDef{Name: name, Description: "echo the request headers",
		OutputSchema: json.RawMessage(`{"type":"object","additionalProperties":{"type":"string"}}`),
		Handler: func(_ context.Context, c *Call) (*Result, error) {
			h := map[string]string{}
			for k, v := range c.Header {
				h[k] = v[0]
			}
			return &Result{Content: Text("headers"), StructuredContent: h}, nil
		}}
}

func (t ToolDef) wire() map[string]any {
	m := map[string]any{"name": t.Name}
	if t.Title != "" {
		m["title"] = t.Title
	}
	if t.Description != "" {
		m["description"] = t.Description
	}
	switch {
	case t.OmitInputSchema:
	case t.InputSchema == nil:
		m["inputSchema"] = json.RawMessage(`{"type":"object"}`)
	default:
		m["inputSchema"] = t.InputSchema
	}
	for k, v := range map[string]json.RawMessage{"outputSchema": t.OutputSchema, "annotations": t.Annotations, "execution": t.Execution} {
		if v != nil {
			m[k] = v
		}
	}
	maps.Copy(m, t.Extra)
	return m
}

func (s *Server) toolsOf(sess *session) []ToolDef {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess != nil {
		return sess.tools
	}
	return append([]ToolDef(nil), s.tools...)
}

// list answers tools/list; the cursor is the offset of the page, opaque to clients.
func (s *Server) list(sess *session, params json.RawMessage) (json.RawMessage, *RPCError) {
	tools := s.toolsOf(sess)
	var p struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(params, &p)
	off := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor[min(len(p.Cursor), len("page-")):])
		if err != nil || n < 0 || n > len(tools) || p.Cursor[:min(len(p.Cursor), 5)] != "page-" {
			return nil, &RPCError{Code: -32602, Message: "invalid cursor"}
		}
		off = n
	}
	end := len(tools)
	if s.opts.PageSize > 0 {
		end = min(off+s.opts.PageSize, len(tools))
	}
	page := []map[string]any{}
	for _, t := range tools[off:end] {
		page = append(page, t.wire())
	}
	res := map[string]any{"tools": page}
	if end < len(tools) {
		res["nextCursor"] = "page-" + strconv.Itoa(end)
	}
	if s.modern() && s.opts.ListTTLMs != nil { // 2026-07-28 caching hints
		res["ttlMs"], res["cacheScope"] = *s.opts.ListTTLMs, "private"
	}
	b, _ := json.Marshal(res)
	return b, nil
}

func (s *Server) call(ctx context.Context, sw *streamWriter, sess *session, m rpcMessage, h http.Header) (json.RawMessage, *RPCError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      json.RawMessage `json:"_meta"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		return nil, &RPCError{Code: -32602, Message: "invalid params"}
	}
	var tool *ToolDef
	for _, t := range s.toolsOf(sess) {
		if t.Name == p.Name {
			tool = &t
			break
		}
	}
	if tool == nil {
		return nil, &RPCError{Code: -32602, Message: "unknown tool: " + p.Name}
	}
	var meta struct {
		ProgressToken json.RawMessage `json:"progressToken"`
	}
	_ = json.Unmarshal(p.Meta, &meta)
	s.mu.Lock()
	s.stats.Executed[p.Name]++
	s.mu.Unlock()
	c := &Call{Tool: p.Name, ID: m.ID, Arguments: p.Arguments, Meta: p.Meta, ProgressToken: meta.ProgressToken, Header: h, sw: sw, srv: s}
	if sess != nil {
		c.Session = sess.id
	}
	var res *Result
	var err error
	if tool.Handler == nil {
		res = &Result{Content: Text("ok")}
	} else {
		res, err = tool.Handler(ctx, c)
	}
	if re, ok := err.(*RPCError); ok {
		return nil, re
	}
	if err != nil {
		res = &Result{Content: Text(err.Error()), IsError: true}
	}
	if res == nil {
		res = &Result{}
	}
	if res.Raw != nil {
		return res.Raw, nil
	}
	out := map[string]any{"content": res.Content}
	if res.Content == nil {
		out["content"] = []any{}
	}
	if res.StructuredContent != nil {
		out["structuredContent"] = res.StructuredContent
	}
	if res.IsError {
		out["isError"] = true
	}
	b, _ := json.Marshal(out)
	return b, nil
}

// Request sends a server-to-client request (method and id) on the response
// stream (SSE only). The server does not wait for the client's answer; use
// [Call.AwaitResponse] to receive it. Every answer is also in
// [Stats.Responses].
func (c *Call) Request(method string, id json.RawMessage, params any) error {
	if !c.sw.sse {
		return nil
	}
	b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	key := waiterKey(c.Session, id)
	c.srv.mu.Lock()
	if c.srv.waiters[key] == nil {
		c.srv.waiters[key] = make(chan ClientResponse, 1)
	}
	c.srv.mu.Unlock()
	return c.sw.message(b)
}

// AwaitResponse waits for the client's response to the server request id
// sent with [Call.Request] on this call's session, or for ctx to end.
func (c *Call) AwaitResponse(ctx context.Context, id json.RawMessage) (ClientResponse, error) {
	key := waiterKey(c.Session, id)
	c.srv.mu.Lock()
	ch := c.srv.waiters[key]
	c.srv.mu.Unlock()
	if ch == nil {
		return ClientResponse{}, fmt.Errorf("mcptest: no server request %s pending on session %q", id, c.Session)
	}
	select {
	case cr := <-ch:
		c.srv.mu.Lock()
		delete(c.srv.waiters, key)
		c.srv.mu.Unlock()
		return cr, nil
	case <-ctx.Done():
		return ClientResponse{}, ctx.Err()
	}
}
