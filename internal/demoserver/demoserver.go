// Package demoserver is a real MCP server built with the official go-sdk.
//
// It backs `agentctl demo` (in-process, production code) and serves as a
// well-behaved protocol peer in tests. Its tools are deterministic:
//
//   - search {q}            → {id, title, score}
//   - get {id}              → {id, title, body}; unknown id → isError "no document <id>"
//   - analyze {text, steps} → {words, steps}; sends `steps` progress notifications first
//   - echo {message}        → {message}
//   - fail {message}        → isError result carrying message
//   - bad_output {}         → structuredContent that violates its declared outputSchema
//   - counter {}            → {count}, incremented on every call (per Server)
//
// Every handler run is counted, see [Server.Calls].
package demoserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Name and Version are the implementation info the server reports in
// its initialize result.
const (
	Name    = "agentctl-demo"
	Version = "1.0.0"
)

// ToolNames lists every tool the server registers, in registration order.
var ToolNames = []string{"search", "get", "analyze", "echo", "fail", "bad_output", "counter"}

// Options configures a Server.
type Options struct {
	// Stateless maps to the go-sdk StreamableHTTPOptions.Stateless: no
	// Mcp-Session-Id is issued or read.
	Stateless bool
	// JSONResponse makes POST responses application/json instead of SSE.
	JSONResponse bool
	// SessionTimeout closes sessions idle for this long (0 = never). Requests
	// naming an expired session are answered 404 by the SDK.
	SessionTimeout time.Duration
	// PageSize is the tools/list page size (0 = SDK default).
	PageSize int
	// StepDelay is waited between analyze progress steps (0 = no delay). The
	// wait ends early when the request is cancelled.
	StepDelay time.Duration
	// Protocol restricts the server to one MCP revision: "" (the go-sdk's
	// defaults, every revision it speaks), "2025-11-25", or "2026-07-28"
	// (stateless: no session, server/discover, input-required results).
	// A 2026-07-28 server also has the tools of ModernToolNames.
	Protocol string
	// OnCall, when set, is called with the tool's name as each handler
	// starts, before it does anything (a test counting executions).
	OnCall func(tool string)
}

// Server is the demo MCP server. Create it with [New].
type Server struct {
	opts    Options
	mcp     *mcp.Server
	handler *mcp.StreamableHTTPHandler
	calls   map[string]*atomic.Int64 // fixed at New; values are atomic
	counter atomic.Int64
}

// SearchInput is the input of the search tool.
type SearchInput struct {
	Q string `json:"q" jsonschema:"the search query"`
}

// SearchOutput is the output of the search tool.
type SearchOutput struct {
	ID    string  `json:"id" jsonschema:"document id, doc- followed by 8 hex digits"`
	Title string  `json:"title"`
	Score float64 `json:"score"`
}

// GetInput is the input of the get tool.
type GetInput struct {
	ID string `json:"id" jsonschema:"a document id returned by search"`
}

// GetOutput is the output of the get tool.
type GetOutput struct {
	ID    string `json:"id"`
	Title string `json:"title"`
	Body  string `json:"body"`
}

// AnalyzeInput is the input of the analyze tool.
type AnalyzeInput struct {
	Text  string `json:"text" jsonschema:"text to analyze"`
	Steps int    `json:"steps,omitempty" jsonschema:"number of progress steps (1..20, default 3)"`
}

// AnalyzeOutput is the output of the analyze tool.
type AnalyzeOutput struct {
	Words int `json:"words"`
	Steps int `json:"steps"`
}

// Message is the input and output of echo and the input of fail.
type Message struct {
	Message string `json:"message"`
}

// Empty is the (empty) input of bad_output and counter.
type Empty struct{}

// CounterOutput is the output of the counter tool.
type CounterOutput struct {
	Count int64 `json:"count"`
}

// DefaultAnalyzeSteps is the analyze steps value used when none is given.
const DefaultAnalyzeSteps = 3

var docID = regexp.MustCompile(`^doc-[0-9a-f]{8}$`)

// DocID returns the document id search produces for q: "doc-" followed by
// the first 8 hex digits of sha256(q).
func DocID(q string) string {
	sum := sha256.Sum256([]byte(q))
	return "doc-" + hex.EncodeToString(sum[:4])
}

// New builds a Server with all tools registered.
func New(opts Options) *Server {
	s := &Server{opts: opts, calls: make(map[string]*atomic.Int64, len(ToolNames))}
	for _, n := range ToolNames {
		s.calls[n] = new(atomic.Int64)
	}
	sopts := &mcp.ServerOptions{PageSize: opts.PageSize}
	if opts.Protocol != "" {
		sopts.SupportedProtocolVersions = []string{opts.Protocol}
	}
	for _, n := range ModernToolNames {
		s.calls[n] = new(atomic.Int64)
	}
	s.mcp = mcp.NewServer(&mcp.Implementation{Name: Name, Version: Version}, sopts)
	s.addLookupTools()
	s.addEffectTools()
	if opts.Protocol == Protocol20260728 {
		s.addModernTools()
	}
	s.handler = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp }, &mcp.StreamableHTTPOptions{
		Stateless:      opts.Stateless || opts.Protocol == Protocol20260728,
		JSONResponse:   opts.JSONResponse,
		SessionTimeout: opts.SessionTimeout,
	})
	return s
}

// addLookupTools registers the read-only tools: search, get, analyze, echo.
func (s *Server) addLookupTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "search",
		Description: "Search the demo corpus; deterministic.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, countTyped(s, "search", func(_ context.Context, _ *mcp.CallToolRequest, in SearchInput) (*mcp.CallToolResult, SearchOutput, error) {
		return nil, SearchOutput{ID: DocID(in.Q), Title: "About " + in.Q, Score: 0.9}, nil
	}))

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "get",
		Description: "Fetch a document by id.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, countTyped(s, "get", func(_ context.Context, _ *mcp.CallToolRequest, in GetInput) (*mcp.CallToolResult, GetOutput, error) {
		if !docID.MatchString(in.ID) {
			return nil, GetOutput{}, fmt.Errorf("no document %s", in.ID)
		}
		title := "Document " + in.ID
		body := fmt.Sprintf("%s is a demo document. Its id is %s. The text of %s is generated, not stored.", title, in.ID, title)
		return nil, GetOutput{ID: in.ID, Title: title, Body: body}, nil
	}))

	analyzeIn, err := jsonschema.For[AnalyzeInput](nil)
	if err != nil {
		panic(err)
	}
	steps := analyzeIn.Properties["steps"]
	steps.Minimum, steps.Maximum = ptr(1.0), ptr(20.0)
	steps.Default = json.RawMessage(fmt.Sprint(DefaultAnalyzeSteps))
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "analyze",
		Description: "Count the words of text, reporting progress once per step.",
		InputSchema: analyzeIn,
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, countTyped(s, "analyze", s.analyze))

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "echo",
		Description: "Return the message unchanged.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true},
	}, countTyped(s, "echo", func(_ context.Context, _ *mcp.CallToolRequest, in Message) (*mcp.CallToolResult, Message, error) {
		return nil, in, nil
	}))
}

// addEffectTools registers the tools that fail or change state: fail,
// bad_output, counter.
func (s *Server) addEffectTools() {
	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "fail",
		Description: "Always fail with the given message (isError result).",
	}, countTyped(s, "fail", func(_ context.Context, _ *mcp.CallToolRequest, in Message) (*mcp.CallToolResult, any, error) {
		res := &mcp.CallToolResult{}
		res.SetError(errors.New(in.Message))
		return res, nil, nil
	}))

	// bad_output is registered raw so the SDK does not validate its output.
	s.mcp.AddTool(&mcp.Tool{
		Name:        "bad_output",
		Description: "Returns structuredContent that violates its own outputSchema.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false},
		OutputSchema: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"n": map[string]any{"type": "integer"}},
			"required":             []string{"n"},
			"additionalProperties": false,
		},
	}, func(_ context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		s.calls["bad_output"].Add(1)
		if s.opts.OnCall != nil {
			s.opts.OnCall("bad_output")
		}
		return &mcp.CallToolResult{
			Content:           []mcp.Content{&mcp.TextContent{Text: `{"n":"x"}`}},
			StructuredContent: map[string]any{"n": "x"},
		}, nil
	})

	mcp.AddTool(s.mcp, &mcp.Tool{
		Name:        "counter",
		Description: "Increment and return a per-server counter (not idempotent).",
		Annotations: &mcp.ToolAnnotations{IdempotentHint: false, DestructiveHint: ptr(false)},
	}, countTyped(s, "counter", func(_ context.Context, _ *mcp.CallToolRequest, _ Empty) (*mcp.CallToolResult, CounterOutput, error) {
		return nil, CounterOutput{Count: s.counter.Add(1)}, nil
	}))
}

func (s *Server) analyze(ctx context.Context, req *mcp.CallToolRequest, in AnalyzeInput) (*mcp.CallToolResult, AnalyzeOutput, error) {
	n := in.Steps
	if n == 0 {
		n = DefaultAnalyzeSteps
	}
	if n < 1 || n > 20 {
		return nil, AnalyzeOutput{}, fmt.Errorf("steps must be within 1..20, got %d", n)
	}
	token := req.Params.GetProgressToken()
	for i := 1; i <= n; i++ {
		if s.opts.StepDelay > 0 {
			t := time.NewTimer(s.opts.StepDelay)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, AnalyzeOutput{}, ctx.Err()
			case <-t.C:
			}
		}
		if token != nil {
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      float64(i),
				Total:         float64(n),
				Message:       fmt.Sprintf("step %d/%d", i, n),
			})
			if err != nil {
				return nil, AnalyzeOutput{}, fmt.Errorf("progress: %w", err)
			}
		}
	}
	return nil, AnalyzeOutput{Words: len(strings.Fields(in.Text)), Steps: n}, nil
}

// countTyped wraps a typed handler so that each run is counted under name.
func countTyped[In, Out any](s *Server, name string, h mcp.ToolHandlerFor[In, Out]) mcp.ToolHandlerFor[In, Out] {
	c := s.calls[name]
	return func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		c.Add(1)
		if s.opts.OnCall != nil {
			s.opts.OnCall(name)
		}
		return h(ctx, req, in)
	}
}

func ptr[T any](v T) *T { return &v }

// Handler returns the Streamable HTTP handler. It answers at any path; mount
// it at /mcp.
func (s *Server) Handler() http.Handler { return s.handler }

// MCPServer returns the underlying go-sdk server (for tests that need to add
// or remove tools, e.g. to simulate a schema change).
func (s *Server) MCPServer() *mcp.Server { return s.mcp }

// Calls reports how many times the named tool's handler ran. Calls that fail
// input validation in the SDK never reach the handler and are not counted.
func (s *Server) Calls(tool string) int64 {
	if c, ok := s.calls[tool]; ok {
		return c.Load()
	}
	return 0
}

// Serve listens on addr, which must name a loopback host (127.0.0.0/8, ::1
// or "localhost"; any other address is refused), and serves Handler at /mcp.
// It returns the endpoint URL (e.g. "http://127.0.0.1:PORT/mcp") and a stop
// function that closes all MCP sessions and shuts the HTTP server down
// gracefully, forcing it closed if ctx ends first.
func (s *Server) Serve(ctx context.Context, addr string) (url string, stop func(context.Context) error, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", nil, fmt.Errorf("demoserver: bad address %q: %w", addr, err)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return "", nil, fmt.Errorf("demoserver: refusing non-loopback address %q", addr)
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", net.JoinHostPort(ip.String(), port))
	if err != nil {
		return "", nil, fmt.Errorf("demoserver: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.handler)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	url = "http://" + ln.Addr().String() + "/mcp"
	stop = func(ctx context.Context) error {
		// Open SSE streams would keep Shutdown waiting: end the sessions first.
		for ss := range s.mcp.Sessions() {
			_ = ss.Close()
		}
		// Shutdown counts a connection a client dialled but never used as
		// busy for five seconds: give the others a short grace, then close.
		grace, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := srv.Shutdown(grace); err != nil {
			if cerr := srv.Close(); cerr != nil {
				return cerr
			}
			return ctx.Err()
		}
		return nil
	}
	return url, stop, nil
}
