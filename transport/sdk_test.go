package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type greetIn struct {
	Name string `json:"name" jsonschema:"who to greet"`
}
type greetOut struct {
	Greeting string `json:"greeting"`
}

func newSDKServer(t *testing.T, opts *mcp.StreamableHTTPOptions) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "v0"}, nil)
	for i := range 3 {
		name := []string{"greet", "greet2", "greet3"}[i]
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "say hi"}, func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
			return nil, greetOut{Greeting: "hello " + in.Name}, nil
		})
	}
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, opts))
	t.Cleanup(ts.Close)
	return ts
}

// recorder is a Sink that keeps every frame.
type recorder struct {
	mu     sync.Mutex
	frames []Frame
}

func (r *recorder) sink(_ context.Context, f Frame) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frames = append(r.frames, f)
	return nil
}

func (r *recorder) all() []Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Frame(nil), r.frames...)
}

func localPolicy() Policy {
	return Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true}
}

func TestSDKServerHappyPath(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"sse", nil},
		{"json", &mcp.StreamableHTTPOptions{JSONResponse: true}},
		{"stateless", &mcp.StreamableHTTPOptions{Stateless: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newSDKServer(t, tc.opts)
			c, err := New(Config{URL: ts.URL, Policy: localPolicy()})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			var rec recorder
			s, err := c.Connect(ctx, rec.sink)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer s.Close(ctx)
			if s.ProtocolVersion != ProtocolVersion {
				t.Errorf("ProtocolVersion = %q", s.ProtocolVersion)
			}
			if d := s.IDDigest(); (d == "") != (tc.name == "stateless") || (d != "" && !strings.HasPrefix(d, "sha256:")) {
				t.Errorf("IDDigest = %q", d)
			}
			cat, err := s.ListTools(ctx, rec.sink)
			if err != nil {
				t.Fatalf("ListTools: %v", err)
			}
			tool, ok := cat.Find("greet")
			if !ok || len(cat.Tools) != 3 {
				t.Fatalf("catalog = %+v", cat)
			}
			args := json.RawMessage(`{"name":"ada"}`)
			if err := ValidateArguments(tool, args); err != nil {
				t.Fatal(err)
			}
			res, err := s.CallTool(ctx, CallRequest{Tool: "greet", Arguments: args}, rec.sink)
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if res.IsError || !strings.Contains(string(res.StructuredContent), "hello ada") {
				t.Errorf("result = %s", res.Raw)
			}
			if err := ValidateOutput(tool, res.StructuredContent); err != nil {
				t.Error(err)
			}
			frames := rec.all()
			if len(frames) < 6 || frames[0].Dir != "out" || frames[0].Method != "initialize" {
				t.Errorf("frames = %+v", frames)
			}
			if err := s.Close(ctx); err != nil {
				t.Error(err)
			}
		})
	}
}
