package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/internal/connstate"
)

// TestClosingLastSessionReleasesConnections: a client keeps its pooled
// connections while one of its sessions is open, and closes them when the
// last one closes, so that a client nobody uses again (a run's) leaves no
// connection behind for IdleConnTimeout.
func TestClosingLastSessionReleasesConnections(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts *mcp.StreamableHTTPOptions
	}{
		{"sse", nil},
		{"stateless", &mcp.StreamableHTTPOptions{Stateless: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "sdk", Version: "v0"}, nil)
			mcp.AddTool(srv, &mcp.Tool{Name: "greet"}, func(ctx context.Context, req *mcp.CallToolRequest, in greetIn) (*mcp.CallToolResult, greetOut, error) {
				return nil, greetOut{Greeting: "hello " + in.Name}, nil
			})
			w := &connstate.Counter{}
			ts := httptest.NewUnstartedServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, tc.opts))
			ts.Config.ConnState = w.Hook
			ts.Start()
			t.Cleanup(ts.Close)

			ctx := context.Background()
			c := newClient(t, ts.URL, nil)
			s1, err := c.Connect(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			s2, err := c.Connect(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			call := func(s *Session) {
				t.Helper()
				if _, err := s.CallTool(ctx, CallRequest{Tool: "greet", Arguments: json.RawMessage(`{"name":"ada"}`)}, nil); err != nil {
					t.Fatal(err)
				}
			}
			call(s1)
			if err := s1.Close(ctx); err != nil {
				t.Fatal(err)
			}
			before, _ := w.Counts()
			call(s2) // s2 still holds the pool: the call reuses an idle connection
			if dialed, _ := w.Counts(); dialed != before {
				t.Fatalf("closing one of two sessions closed the pool: %d connections dialed, %d before", dialed, before)
			}
			if err := s2.Close(ctx); err != nil {
				t.Fatal(err)
			}
			w.WaitClosed(t, "the server after the client's last session closed", 10*time.Second)
		})
	}
}

// TestFailedConnectReleasesConnections: a Connect that fails (here the
// server answers initialize with 500) leaves no connection open when the
// client has no session, as a run that cannot open its session discards
// its client.
func TestFailedConnectReleasesConnections(t *testing.T) {
	w := &connstate.Counter{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		http.Error(rw, "down for maintenance", http.StatusInternalServerError)
	}))
	ts.Config.ConnState = w.Hook
	ts.Start()
	t.Cleanup(ts.Close)
	c := newClient(t, ts.URL, nil)
	if _, err := c.Connect(context.Background(), nil); err == nil {
		t.Fatal("Connect succeeded against a server that answers 500")
	}
	if n := w.WaitClosed(t, "the server after the failed Connect", 10*time.Second); n == 0 {
		t.Fatal("Connect made no connection")
	}
}
