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
		caps["tasks"] = map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
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
