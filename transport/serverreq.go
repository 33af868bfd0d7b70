package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// Server requests (a message with method and id on one of our streams) are
// answered, as JSON-RPC requires. agentctl declares no roots or sampling,
// and elicitation only when Config.Elicitation says so; ping, a basic
// utility every party must answer, gets an empty result, elicitation/create
// (when declared) the answer of the call's ElicitationPolicy, and every
// other request the error below.
const (
	codeMethodNotFound   = -32601
	msgNoCapabilities    = "method not found: agentctl declares no client capabilities"
	serverRequestTimeout = 2 * time.Second
)

type wireResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// answer replies to the server request m. The reply is handed to the sink
// as an "out" "response" frame (Method: the request's method) before it is
// sent; a sink failure aborts like any other. Sending is best-effort and
// bounded by serverRequestTimeout: no outcome of the POST fails the
// exchange, and the stream is not read meanwhile (the inactivity timer is
// paused, MaxDuration still holds).
func (x *exchange) answer(m *message) error {
	reply := wireResponse{JSONRPC: "2.0", ID: m.ID}
	switch {
	case m.Method == "ping":
		reply.Result = json.RawMessage(`{}`)
	case m.Method == methodElicitationCreate && x.s.c.cfg.Elicitation:
		if x.elicited.Add(1) > maxElicitations {
			reply.Result = json.RawMessage(`{"action":"decline"}`)
		} else {
			reply.Result = elicitationOf(x.ctx).elicitResult(m.Params)
		}
	default:
		reply.Error = &rpcError{Code: codeMethodNotFound, Message: msgNoCapabilities}
	}
	body, err := canonjson.Marshal(reply)
	if err != nil {
		return nil // cannot happen: every part is already valid JSON
	}
	if err := x.emit(Frame{Dir: "out", Kind: "response", Method: m.Method, ID: m.ID, Body: body}); err != nil {
		return err
	}
	x.idle.Stop()
	defer x.idle.Reset(x.s.c.timeout)
	if x.s.proc != nil {
		_ = x.s.proc.write(x.rctx, body, serverRequestTimeout)
		return nil
	}
	ctx, cancel := context.WithTimeout(x.rctx, serverRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, x.s.c.url.String(), bytes.NewReader(body))
	if err != nil {
		return nil
	}
	if x.s.setHeaders(req, true) != nil {
		return nil
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := x.s.c.http.Do(req)
	if err != nil {
		return nil
	}
	drain(resp)
	return nil
}
