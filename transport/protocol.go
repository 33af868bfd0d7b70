package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"
)

// The MCP revisions a client speaks, and the pin that picks one by probing.
const (
	// Protocol20251125 is the stateful revision (initialize, sessions); the
	// default pin.
	Protocol20251125 = ProtocolVersion
	// Protocol20260728 is the stateless revision: no initialize, no session
	// id, per-request _meta, standard headers, input-required results.
	Protocol20260728 = "2026-07-28"
	// ProtocolAuto probes once (server/discover, falling back to
	// initialize) and keeps the answer for every later session of the client.
	ProtocolAuto = "auto"
)

// ProtocolVersions lists the revisions agentctl speaks, newest first.
var ProtocolVersions = []string{Protocol20260728, Protocol20251125}

// The io.modelcontextprotocol/* _meta keys every 2026-07-28 request carries.
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
)

// JSON-RPC error codes of 2026-07-28 that are definitive answers: the
// request did not run.
const (
	// CodeHeaderMismatch: the standard headers disagree with the body.
	CodeHeaderMismatch = -32020
	// CodeMissingClientCapabilities: the request needs a capability the
	// client did not declare.
	CodeMissingClientCapabilities = -32021
	// CodeUnsupportedProtocolVersion: the server refuses the version the
	// request carries; data.supported lists the ones it speaks.
	CodeUnsupportedProtocolVersion = -32022
)

const methodDiscover = "server/discover"

// CheckProtocolPin reports whether pin is a valid protocolVersion setting
// ("" is the default, 2025-11-25).
func CheckProtocolPin(pin string) error {
	switch pin {
	case "", Protocol20251125, Protocol20260728, ProtocolAuto:
		return nil
	}
	return fmt.Errorf("protocolVersion %q: want %s, %s or %s", pin, Protocol20251125, Protocol20260728, ProtocolAuto)
}

// pin is the version the next Connect speaks: the configured pin, or what
// an auto probe of this client already settled on.
func (c *Client) pin() string {
	c.protoMu.Lock()
	defer c.protoMu.Unlock()
	if c.resolved != "" {
		return c.resolved
	}
	if c.cfg.ProtocolVersion == "" {
		return Protocol20251125
	}
	return c.cfg.ProtocolVersion
}

// settle records the version an auto probe found.
func (c *Client) settle(v string) {
	c.protoMu.Lock()
	defer c.protoMu.Unlock()
	if c.resolved == "" {
		c.resolved = v
	}
}

// stateless reports whether the session speaks 2026-07-28.
func (s *Session) stateless() bool { return s.ProtocolVersion == Protocol20260728 }

// connectStateless opens a 2026-07-28 session: nothing but server/discover
// (a probe that executes nothing), for the server's info and capabilities
// and to learn early that it refuses the version. probing (auto) makes a
// refusal ErrNotStateless so the caller falls back to initialize.
func (s *Session) connectStateless(ctx context.Context, sink Sink, probing bool) (*Session, error) {
	s.ProtocolVersion = Protocol20260728
	var m *message
	var err error
	for round := 0; round < 2; round++ {
		m, err = s.roundTrip(ctx, methodDiscover, nil, sink, s.newID())
		var te *Error
		if err == nil || !errors.As(err, &te) || te.Kind != KindVersionMismatch || round > 0 || !slices.Contains(te.Supported, Protocol20260728) {
			break
		}
		// The server refused 2026-07-28 while naming it among the versions
		// it speaks: it did not run anything, so ask once more.
	}
	if err != nil {
		var te *Error
		if probing && errors.As(err, &te) && !te.MayHaveExecuted() && te.Kind != KindPolicyDenied && te.Kind != KindUnauthorized {
			return nil, fmt.Errorf("%w: %w", errNotStateless, err)
		}
		if !probing && errors.As(err, &te) && te.Kind == KindRemoteError && te.Code == codeMethodNotFound {
			return s, nil // a 2026-07-28 server need not answer server/discover
		}
		return nil, err
	}
	var res struct {
		SupportedVersions []string
		Capabilities      json.RawMessage
		Instructions      string
		ServerInfo        json.RawMessage
	}
	var raw map[string]json.RawMessage
	if err := strictUnmarshal(m.Result, &raw); err != nil {
		return nil, &Error{Op: methodDiscover, Kind: KindMalformed, Sent: true, Err: fmt.Errorf("%w: server/discover result: %v", errMalformed, err)}
	}
	_ = json.Unmarshal(raw["supportedVersions"], &res.SupportedVersions)
	_ = json.Unmarshal(raw["instructions"], &res.Instructions)
	res.Capabilities, res.ServerInfo = raw["capabilities"], raw["serverInfo"]
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw["_meta"], &meta) == nil && present(meta[metaServerInfo]) {
		res.ServerInfo = meta[metaServerInfo]
	}
	if len(res.SupportedVersions) > 0 && !slices.Contains(res.SupportedVersions, Protocol20260728) {
		e := versionRefused(s.c, methodDiscover, Protocol20260728, res.SupportedVersions)
		if probing {
			return nil, fmt.Errorf("%w: %w", errNotStateless, e)
		}
		return nil, e
	}
	s.Capabilities, s.ServerInfo, s.Instructions = s.c.red.json(nonNull(res.Capabilities)), s.c.red.json(nonNull(res.ServerInfo)), s.c.red.string(res.Instructions)
	return s, nil
}

// errNotStateless: an auto probe found no 2026-07-28 server.
var errNotStateless = errors.New("server/discover did not confirm 2026-07-28")

// versionRefused is the error for a server that does not speak want.
func versionRefused(c *Client, op, want string, supported []string) *Error {
	offers := make([]string, len(supported))
	for i, v := range supported {
		offers[i] = fmt.Sprintf("%q", c.red.cut(v, 32))
	}
	msg := fmt.Sprintf("server refuses protocol version %s, which this remote is pinned to; it offers %s", want, strings.Join(offers, ", "))
	if len(offers) == 0 {
		msg = fmt.Sprintf("server refuses protocol version %s, which this remote is pinned to, and names none it offers", want)
	}
	return &Error{Op: op, Kind: KindVersionMismatch, Sent: true, Message: msg, Supported: slices.Clone(supported)}
}

// withMeta returns the params of a 2026-07-28 request: params (a map or
// nil) with the io.modelcontextprotocol/* _meta members added. The
// caller's map is not modified.
func (s *Session) withMeta(params any) any {
	return addMeta(params, map[string]any{
		MetaProtocolVersion:    Protocol20260728,
		MetaClientCapabilities: s.c.statelessCapabilities(),
		MetaClientInfo:         map[string]any{"name": "agentctl", "version": s.c.clientVersion()},
	})
}

// addMeta returns a copy of params (a map, a struct or nil) whose _meta
// holds add besides what it held; params that are not a JSON object are
// returned as they are. The caller's params are not modified.
func addMeta(params any, add map[string]any) any {
	p := map[string]any{}
	switch v := params.(type) {
	case nil:
	case map[string]any:
		maps.Copy(p, v)
	default:
		b, err := json.Marshal(v)
		if err != nil || json.Unmarshal(b, &p) != nil {
			return params
		}
	}
	meta := map[string]any{}
	if m, ok := p["_meta"].(map[string]any); ok {
		maps.Copy(meta, m)
	}
	maps.Copy(meta, add)
	p["_meta"] = meta
	return p
}

// unsupportedVersion reads the data of a -32022 error: the versions the
// server speaks (nil when it names none).
func unsupportedVersion(data json.RawMessage) []string {
	var d struct {
		Supported []string `json:"supported"`
	}
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	return d.Supported
}

// resultType reads a 2026-07-28 result's resultType: "complete" when the
// member is absent (a server of an older revision).
func resultType(result json.RawMessage) (string, error) {
	var r struct {
		ResultType *string `json:"resultType"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return "", err
	}
	if r.ResultType == nil {
		return "complete", nil
	}
	return *r.ResultType, nil
}

// remoteError is the *Error of a JSON-RPC error response: -32022 is a
// version refusal (KindVersionMismatch, naming what the server offers),
// anything else KindRemoteError. Both are definitive.
func (x *exchange) remoteError(e *rpcError, status int) *Error {
	red := x.s.c.red
	if e.Code == CodeUnsupportedProtocolVersion {
		want := x.s.ProtocolVersion
		if want == "" {
			want = Protocol20251125
		}
		ve := versionRefused(x.s.c, x.op, want, unsupportedVersion(e.Data))
		ve.Code, ve.Status, ve.Data = e.Code, status, red.json(nonNull(e.Data))
		return ve
	}
	return &Error{Op: x.op, Kind: KindRemoteError, Code: e.Code, Message: red.cut(e.Message, 1024), Sent: true, Status: status,
		Data: red.json(nonNull(e.Data))}
}

// rpcErrorBody reads a non-2xx JSON answer that is a JSON-RPC error for
// our request (2026-07-28 servers answer -32020, -32021 and -32022 so),
// leaving the body readable for the http_error frame; nil when it is not.
func (x *exchange) rpcErrorBody(resp *http.Response) *Error {
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "application/json" {
		return nil
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(b), resp.Body))
	var m struct {
		ID    json.RawMessage `json:"id"`
		Error *rpcError       `json:"error"`
	}
	if checkDepth(b) != nil || strictUnmarshal(b, &m) != nil || m.Error == nil {
		return nil
	}
	if id := strings.TrimSpace(string(m.ID)); id != "" && id != "null" && id != string(x.id) {
		return nil
	}
	return x.remoteError(m.Error, resp.StatusCode)
}

// textVersionRefusal recognises the plain-text 400 a go-sdk server sends
// for a protocol version it does not speak ("Unsupported protocol version
// (supported versions: A,B)") and returns the versions it names; nil when
// detail is not such a refusal.
func textVersionRefusal(detail string) []string {
	_, rest, ok := strings.Cut(strings.ToLower(detail), "unsupported protocol version")
	if !ok {
		return nil
	}
	_, list, ok := strings.Cut(rest, "supported versions:")
	if !ok {
		return []string{}
	}
	list, _, _ = strings.Cut(list, ")")
	var out []string
	for _, v := range strings.Split(list, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	if out == nil {
		return []string{}
	}
	return out
}
