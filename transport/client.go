package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ProtocolVersion is the MCP protocol version a remote is spoken to in
// unless its Config.ProtocolVersion says otherwise (see Protocol20260728).
const ProtocolVersion = "2025-11-25"

// Origin is the Origin header sent with every request.
const Origin = "agentctl://local"

const (
	defaultTimeout        = 120 * time.Second
	defaultMaxResumeDelay = 5 * time.Second
	defaultResumeDelay    = time.Second
	maxResumes            = 2
	cancelNotifyTimeout   = 2 * time.Second
	closeTimeout          = 2 * time.Second
)

// Config configures one client for one remote server.
type Config struct {
	URL         string
	Headers     map[string]SecretRef
	Policy      Policy
	Timeout     time.Duration       // inactivity bound, restarted by every frame; 0 = 120s
	MaxDuration time.Duration       // whole-request bound; 0 = 10 × Timeout
	UserAgent   string              // "" = "agentctl/dev"
	Getenv      func(string) string // nil = os.Getenv (test hook)
	HTTPClient  *http.Client        // nil = built from Policy (pinned dialer, no proxy, no redirects). Tests/replay may inject.
	// MaxResumeDelay caps the wait before resuming a broken SSE stream (the
	// server's retry field, default 1s); 0 = 5s, negative = resume at once.
	MaxResumeDelay time.Duration
	// MaxPollInterval caps the wait between two tasks/get of PollTask,
	// whatever pollInterval the server suggests; 0 = 30s.
	MaxPollInterval time.Duration
	// Elicitation declares the elicitation capability (form mode) at
	// initialize, so the server may send elicitation/create; each call
	// answers by its CallRequest.Elicitation (nil: decline).
	Elicitation bool
	// TasksExtension declares the io.modelcontextprotocol/tasks extension
	// on 2026-07-28 requests, so the server may answer a tools/call with a
	// task (CallResult.Task; tasks2026.go). Unused at 2025-11-25.
	TasksExtension bool
	// ProtocolVersion pins the MCP revision: "" or Protocol20251125 (the
	// default), Protocol20260728, or ProtocolAuto (the first Connect probes;
	// every later one keeps what it found).
	ProtocolVersion string

	// Command, when set, makes this a stdio client (URL, Headers and the
	// network policy are then unused): [PROGRAM, ARG...], the program
	// resolved on PATH once by New. Each Connect starts one process.
	Command []string
	// Env is a stdio server's declared environment; it also gets the
	// variables of StdioBaseEnv that are set, and nothing else.
	Env map[string]EnvValue
	// Dir is a stdio server's working directory; "" = agentctl's.
	Dir string
	// ShutdownGrace is the wait after closing a stdio server's stdin, and
	// again after SIGTERM to its process group, before SIGKILL; 0 = 2s.
	ShutdownGrace time.Duration

	// Authorizer, when set, authorizes every HTTP request with OAuth
	// credentials (transport/oauth.Authorizer) and answers the server's 401
	// and 403 insufficient_scope challenges.
	Authorizer Authorizer

	// TraceContext, when set, gives each request its W3C trace context
	// (traceparent, tracestate; "" = none): sent in params._meta on both
	// protocol revisions and, over HTTP, as the traceparent and tracestate
	// headers. nil (telemetry off) adds nothing.
	TraceContext func() (traceparent, tracestate string)
}

// Authorizer supplies a server's OAuth credentials; *oauth.Authorizer
// (package transport/oauth) implements it. A 401 is answered once per
// request (the request is re-sent: a 401 means it did not execute); a 403
// insufficient_scope up to MaxStepUps times.
type Authorizer interface {
	// Authorize sets req's Authorization (and DPoP) headers.
	Authorize(ctx context.Context, req *http.Request) error
	// OnUnauthorized answers a 401 (refresh, or a new grant); nil: re-send.
	OnUnauthorized(ctx context.Context, resp *http.Response) error
	// OnForbidden answers a 403 (step-up on insufficient_scope); nil: re-send.
	OnForbidden(ctx context.Context, resp *http.Response) error
}

// MaxStepUps bounds the insufficient_scope re-authorizations of one request.
const MaxStepUps = 2

// Frame is one protocol step handed to the Sink, already redacted of secret values.
type Frame struct {
	Dir        string          // "out" or "in"
	Kind       string          // "request", "notification", "response", "server_request", "http_error", "resume"
	Method     string          // JSON-RPC method when known ("" for an "in" response; for an "out" response, the server request's)
	ID         json.RawMessage // JSON-RPC id when present
	HTTPStatus int             // status of the HTTP response carrying an "in" frame (0 for "out")
	EventID    string          // SSE event id when present
	Body       json.RawMessage // the whole JSON-RPC message as sent/received (redacted)
}

// Sink receives every frame synchronously and in order; the next frame is neither sent nor read until it returns.
// An "out" frame is handed to the sink BEFORE its bytes are sent (so the caller can persist intent first).
// A non-nil error aborts the operation (reported as a TransportLoss-kind Error wrapping it).
// A nil Sink discards frames.
type Sink func(ctx context.Context, f Frame) error

// Client talks to one remote MCP server. It is safe for concurrent use.
type Client struct {
	cfg            Config
	url            *url.URL
	http           *http.Client
	injected       bool
	dialer         *pinnedDialer
	red            *redactor
	timeout        time.Duration
	maxDuration    time.Duration
	maxResumeDelay time.Duration
	maxBytes       int64
	stdio          *stdioSpec // nil for Streamable HTTP
	getenv         func(string) string
	userAgent      string
	// nextID numbers JSON-RPC requests across every session of the client,
	// so a redispatch on a new session carries a new id.
	nextID atomic.Int64
	// noDrain is set once a response stream did not end soon after its
	// response (drain.go): the client then closes such streams at once.
	noDrain atomic.Bool

	protoMu  sync.Mutex
	resolved string // the version an auto probe settled on

	// live counts the HTTP sessions Connect and Reattach returned that are
	// not closed yet; when the last one closes, the client's idle pooled
	// connections are closed too (release).
	live atomic.Int64
}

// hold counts s as one of the client's live HTTP sessions.
func (c *Client) hold(s *Session) *Session {
	if s.proc == nil {
		s.held = true
		c.live.Add(1)
	}
	return s
}

// release ends one live session's hold. The last one closes the idle
// connections of the client's own pool, and its Authorizer's: a client that nobody will use
// again (a run's, once it closed its sessions) would otherwise keep them,
// two goroutines here and one in the server each, for IdleConnTimeout. A
// later Connect dials anew. An injected client's pool is its owner's.
func (c *Client) release() {
	if c.live.Add(-1) != 0 {
		return
	}
	if !c.injected {
		c.http.CloseIdleConnections()
	}
	if a, ok := c.cfg.Authorizer.(idleCloser); ok {
		a.CloseIdleConnections() // the authorization server's (oauth.Authorizer)
	}
}

// idleCloser is an Authorizer with connections of its own to close.
type idleCloser interface{ CloseIdleConnections() }

// reservedHeaders may not be set through Config.Headers.
var reservedHeaders = map[string]bool{
	"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true, "Origin": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true, "User-Agent": true,
	"Connection": true, "Transfer-Encoding": true,
}

// New validates cfg (the URL against the policy: PolicyDenied error) and
// returns a client. It does no network I/O; DNS is resolved at the first dial.
func New(cfg Config) (*Client, error) {
	if err := CheckProtocolPin(cfg.ProtocolVersion); err != nil {
		return nil, &Error{Op: "config", Kind: KindVersionMismatch, Err: err}
	}
	if len(cfg.Command) > 0 {
		return newStdioClient(cfg)
	}
	u, err := cfg.Policy.checkURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	for name, ref := range cfg.Headers {
		if name == "" || strings.ContainsAny(name, " \t\r\n:") {
			return nil, &Error{Op: "config", Kind: KindPolicyDenied, Err: fmt.Errorf("invalid header name %q", name)}
		}
		if reservedHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
			return nil, &Error{Op: "config", Kind: KindPolicyDenied, Err: fmt.Errorf("header %q is set by the transport", name)}
		}
		if (ref.Env == "") == (ref.File == "") {
			return nil, &Error{Op: "config", Kind: KindPolicyDenied, Err: fmt.Errorf("header %q: secret reference needs exactly one of env and file", name)}
		}
	}
	c := &Client{cfg: cfg, url: u, red: &redactor{}, getenv: cfg.Getenv, userAgent: cfg.UserAgent}
	if c.getenv == nil {
		c.getenv = os.Getenv
	}
	if c.userAgent == "" {
		c.userAgent = "agentctl/dev"
	}
	c.setBounds()
	c.maxResumeDelay = cfg.MaxResumeDelay
	if c.maxResumeDelay == 0 {
		c.maxResumeDelay = defaultMaxResumeDelay
	}
	if cfg.HTTPClient != nil {
		hc := *cfg.HTTPClient // never follow redirects, whoever built the client
		hc.CheckRedirect = noRedirect
		c.http, c.injected = &hc, true
	} else {
		c.http, c.dialer = newHTTPClient(u, cfg.Policy)
	}
	return c, nil
}

// capabilities are the client capabilities declared at initialize.
func (c *Client) capabilities() map[string]any {
	caps := map[string]any{}
	if c.cfg.Elicitation {
		caps["elicitation"] = map[string]any{"form": map[string]any{}}
	}
	return caps
}

// setBounds applies the timeouts and the size bound of the config.
func (c *Client) setBounds() {
	c.timeout = c.cfg.Timeout
	if c.timeout <= 0 {
		c.timeout = defaultTimeout
	}
	c.maxDuration = c.cfg.MaxDuration
	if c.maxDuration <= 0 {
		c.maxDuration = 10 * c.timeout
	}
	c.maxBytes = c.cfg.Policy.maxResponseBytes()
}

// newStdioClient is New for a stdio server: the program is resolved now;
// nothing starts until Connect.
func newStdioClient(cfg Config) (*Client, error) {
	spec, err := newStdioSpec(cfg)
	if err != nil {
		return nil, err
	}
	c := &Client{cfg: cfg, red: &redactor{}, getenv: cfg.Getenv, userAgent: cfg.UserAgent, stdio: spec}
	if c.getenv == nil {
		c.getenv = os.Getenv
	}
	if c.userAgent == "" {
		c.userAgent = "agentctl/dev"
	}
	c.setBounds()
	return c, nil
}

// clientVersion is the version part of the User-Agent ("dev" by default).
func (c *Client) clientVersion() string {
	if _, v, ok := strings.Cut(c.userAgent, "/"); ok && v != "" {
		return strings.Fields(v)[0]
	}
	return "dev"
}

// Session is one initialized MCP session. It is safe for concurrent use:
// each call is an independent HTTP exchange with its own JSON-RPC id, and
// each call's frames reach that call's sink in order (there is no order
// across concurrent calls).
type Session struct {
	ProtocolVersion string
	ServerInfo      json.RawMessage // as received, redacted of the secret values sent
	Capabilities    json.RawMessage // as received, redacted
	Instructions    string          // as received, redacted

	c         *Client
	sessionID string
	closed    atomic.Bool
	held      bool // counted in c.live (hold)
	// toolsChanged is set by notifications/tools/list_changed on any of the
	// session's streams and cleared when ListTools starts (ToolsChanged).
	toolsChanged atomic.Bool

	// bindings are the x-mcp-header annotations of the tools last listed
	// (2026-07-28), by tool name.
	hdrMu    sync.Mutex
	bindings map[string][]headerBinding

	// gets is the standalone GET stream of a 2025-11-25 session (standalone.go).
	gets standalone

	proc     *proc // the server process of a stdio session (nil for HTTP)
	procSink Sink  // the sink Connect was given: Close records the process's end there
}

// Connect initializes a session: initialize (the server must answer
// protocolVersion 2025-11-25, else KindVersionMismatch) followed by
// notifications/initialized. Initialize is never cancelled with a
// notification, as the spec forbids it.
//
// A client pinned to 2026-07-28 sends no initialize: Connect asks
// server/discover instead (a server that does not know the method is
// taken at its word), and every request then carries the version itself.
// With ProtocolAuto the first Connect probes server/discover and falls
// back to initialize; later ones keep the version found.
func (c *Client) Connect(ctx context.Context, sink Sink) (*Session, error) {
	s := &Session{c: c}
	if c.stdio != nil {
		if err := s.start(ctx, sink); err != nil {
			return nil, err
		}
		sess, err := s.open(ctx, sink)
		if err != nil {
			err = s.stdioStartFailed(err)
			_ = s.Close(ctx)
			return nil, err
		}
		return sess, nil
	}
	sess, err := s.open(ctx, sink)
	if err != nil {
		if c.live.Load() == 0 && !c.injected {
			// No session holds the pool: the failed handshake's
			// connection would only wait out IdleConnTimeout.
			c.http.CloseIdleConnections()
		}
		return nil, err
	}
	return c.hold(sess), nil
}

// open runs the lifecycle of the client's pin once the transport is up.
func (s *Session) open(ctx context.Context, sink Sink) (*Session, error) {
	switch s.c.pin() {
	case Protocol20260728:
		return s.connectStateless(ctx, sink, false)
	case ProtocolAuto:
		sess, err := s.connectStateless(ctx, sink, true)
		if err == nil {
			s.c.settle(Protocol20260728)
			return sess, nil
		}
		if !errors.Is(err, errNotStateless) {
			return nil, err
		}
		s.ProtocolVersion, s.Capabilities, s.ServerInfo, s.Instructions = "", nil, nil, ""
		sess, err = s.connect(ctx, sink)
		if err == nil {
			s.c.settle(Protocol20251125)
		}
		return sess, err
	}
	return s.connect(ctx, sink)
}

// connect is Connect once the transport is up.
func (s *Session) connect(ctx context.Context, sink Sink) (*Session, error) {
	c := s.c
	params := map[string]any{
		"protocolVersion": ProtocolVersion,
		"capabilities":    c.capabilities(),
		"clientInfo":      map[string]any{"name": "agentctl", "version": c.clientVersion()},
	}
	m, err := s.roundTrip(ctx, "initialize", params, sink, s.newID())
	if err != nil {
		return nil, err
	}
	var res struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := strictUnmarshal(m.Result, &res); err != nil {
		return nil, &Error{Op: "initialize", Kind: KindMalformed, Sent: true, Err: fmt.Errorf("%w: initialize result: %v", errMalformed, err)}
	}
	if res.ProtocolVersion != ProtocolVersion {
		_ = s.Close(ctx)
		return nil, &Error{Op: "initialize", Kind: KindVersionMismatch, Sent: true, Supported: []string{res.ProtocolVersion},
			Message: fmt.Sprintf("server answered protocol version %q at initialize, agentctl asked for %q (this remote's pin); it offers %q", c.red.cut(res.ProtocolVersion, 32), ProtocolVersion, c.red.cut(res.ProtocolVersion, 32))}
	}
	// A server may echo the credential it received anywhere: what is kept
	// of its answer is redacted like its frames.
	s.ProtocolVersion, s.Capabilities, s.ServerInfo, s.Instructions = res.ProtocolVersion, c.red.json(res.Capabilities), c.red.json(res.ServerInfo), c.red.string(res.Instructions)
	if _, err := s.roundTrip(ctx, "notifications/initialized", nil, sink, nil); err != nil {
		_ = s.Close(ctx)
		return nil, err
	}
	return s, nil
}

// IDDigest returns "sha256:<hex>" of the MCP-Session-Id, or "" when the
// server sent none. The raw id is a bearer credential and never exposed.
func (s *Session) IDDigest() string {
	if s.sessionID == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s.sessionID))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Close ends the session with a best-effort DELETE carrying the session id
// (bounded to 2s). It is idempotent; a server refusing DELETE (405) or not
// knowing the session (404) is not an error.
func (s *Session) Close(ctx context.Context) error {
	return s.CloseWith(ctx, nil)
}

// ClosesSilently reports whether Close records nothing: an HTTP session's
// close is one DELETE request no sink sees, so a caller may overlap it
// with its own work (a run, with committing its end); a stdio session's
// records the server's exit.
func (s *Session) ClosesSilently() bool { return s.proc == nil }

// CloseWith is Close, recording a stdio server's end (the messages no
// exchange took, then the "process_exit" frame) with sink instead of the
// sink Connect was given (nil: that one). A caller whose Connect sink is
// bound to one task's records passes the run's own at the end.
func (s *Session) CloseWith(ctx context.Context, sink Sink) error {
	if s.proc != nil {
		if sink == nil {
			sink = s.procSink
		}
		return s.closeStdio(ctx, sink)
	}
	if s.closed.Swap(true) {
		return nil
	}
	if s.held {
		defer s.c.release()
	}
	if s.sessionID == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, s.c.url.String(), nil)
	if err != nil {
		return &Error{Op: "close", Kind: KindTransportLoss, Err: err}
	}
	if err := s.setHeaders(req, false); err != nil {
		return err
	}
	resp, err := s.c.http.Do(req)
	if err != nil {
		return &Error{Op: "close", Kind: KindTransportLoss, Err: s.c.red.error(err)}
	}
	drain(resp)
	return nil
}
