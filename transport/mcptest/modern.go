package mcptest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Protocol20260728 is the stateless MCP revision. A server whose
// Options.ProtocolVersion is this one is stateless (no initialize session,
// no session id), answers server/discover, and refuses a request whose
// MCP-Protocol-Version header names another revision with -32022.
const Protocol20260728 = "2026-07-28"

func init() {
	requests["server/discover"] = (*Server).serveDiscover
}

// modern reports whether s speaks 2026-07-28.
func (s *Server) modern() bool { return s.opts.ProtocolVersion == Protocol20260728 }

// serveDiscover answers server/discover on a 2026-07-28 server; a server of
// an older revision does not know the method.
func (s *Server) serveDiscover(_ context.Context, _ *streamWriter, _ *inbound) (json.RawMessage, *RPCError) {
	if !s.modern() {
		return nil, &RPCError{Code: -32601, Message: "method not found: server/discover"}
	}
	caps := map[string]any{"tools": map[string]any{"listChanged": false}}
	if s.opts.Tasks != nil {
		caps["extensions"] = map[string]any{extensionTasks: map[string]any{}}
	}
	b, _ := json.Marshal(map[string]any{"resultType": "complete", "supportedVersions": []string{Protocol20260728},
		"capabilities": caps, "serverInfo": map[string]any{"name": "mcptest", "version": "0"}})
	return b, nil
}

// checkModernVersion refuses, on a 2026-07-28 server, a request whose
// MCP-Protocol-Version header is not 2026-07-28 (-32022, HTTP 400); it
// answers the error itself.
func (s *Server) checkModernVersion(in *inbound) bool {
	if !s.modern() || in.m.ID == nil || in.m.isResponse() {
		return true
	}
	if v := in.r.Header.Get("Mcp-Protocol-Version"); v != Protocol20260728 {
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": in.m.ID, "error": map[string]any{
			"code": -32022, "message": fmt.Sprintf("mcptest: unsupported protocol version %q", v),
			"data": map[string]any{"supported": []string{Protocol20260728}}}})
		writeJSON(in.w, http.StatusBadRequest, b)
		return false
	}
	return true
}

// extensionTasks is the 2026-07-28 tasks extension's identifier.
const extensionTasks = "io.modelcontextprotocol/tasks"

func init() {
	requests["tasks/update"] = (*Server).serveTaskUpdate
}

// callModern serves a tools/call of a 2026-07-28 server with Options.Tasks:
// a tool whose execution.taskSupport is optional or required becomes a task
// when the request declares the tasks extension; a required one without it
// is -32021 naming the extension.
func (s *Server) callModern(ctx context.Context, sw *streamWriter, in *inbound, callTool requestHandler) (json.RawMessage, *RPCError) {
	support := s.taskSupport(in)
	switch {
	case declaresTasks(in.m.Params) && (support == "optional" || support == "required"):
		return s.createTask(ctx, sw, in, json.RawMessage(`{}`))
	case support == "required":
		return nil, &RPCError{Code: -32021, Message: "Missing required client capability",
			Data: json.RawMessage(`{"requiredCapabilities":{"extensions":{"` + extensionTasks + `":{}}}}`)}
	}
	return callTool(s, ctx, sw, in)
}

// declaresTasks reports whether a request's clientCapabilities declare the
// tasks extension.
func declaresTasks(params json.RawMessage) bool {
	var p struct {
		Meta struct {
			Caps struct {
				Extensions map[string]json.RawMessage `json:"extensions"`
			} `json:"io.modelcontextprotocol/clientCapabilities"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(params, &p)
	_, ok := p.Meta.Caps.Extensions[extensionTasks]
	return ok
}

// detail adds to a 2026-07-28 tasks/get answer its resultType and the
// status's inline member: the result, the error, or the input requests.
func (s *Server) detail(t *task, status string, obj map[string]any) {
	obj["resultType"] = "complete"
	switch status {
	case "completed":
		obj["result"] = t.result
	case "failed":
		e := map[string]any{"code": -32603, "message": t.message}
		if t.rpcErr != nil {
			e["code"], e["message"] = t.rpcErr.Code, t.rpcErr.Message
		}
		obj["error"] = e
	case TaskInputRequired:
		params := s.opts.Tasks.Elicit
		if params == nil {
			params = json.RawMessage(`{"message":"mcptest asks","requestedSchema":{"type":"object","properties":{}}}`)
		}
		obj["inputRequests"] = map[string]any{fmt.Sprintf("ask-%d", t.answered+1): map[string]any{"method": "elicitation/create", "params": params}}
	}
}

// serveTaskUpdate takes a tasks/update (2026-07-28): the inputResponses are
// recorded; one answering the current round's key moves the task on.
func (s *Server) serveTaskUpdate(_ context.Context, _ *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
	if !s.modern() || s.opts.Tasks == nil {
		return nil, &RPCError{Code: -32601, Message: "method not found: tasks/update"}
	}
	st := &s.tasks
	st.mu.Lock()
	defer st.mu.Unlock()
	t, rpcErr := s.lookup(in, func(ts *TaskStats) { ts.Updates++ })
	if rpcErr != nil {
		return nil, rpcErr
	}
	var p struct {
		InputResponses map[string]json.RawMessage `json:"inputResponses"`
	}
	if json.Unmarshal(in.m.Params, &p) != nil || p.InputResponses == nil {
		return nil, &RPCError{Code: -32602, Message: "tasks/update without inputResponses"}
	}
	raw, _ := json.Marshal(p.InputResponses)
	st.stats.InputResponses = append(st.stats.InputResponses, raw)
	if _, ok := p.InputResponses[fmt.Sprintf("ask-%d", t.answered+1)]; ok && t.answered < s.opts.Tasks.InputRounds {
		t.answered++
	}
	return json.RawMessage(`{"resultType":"complete"}`), nil
}
