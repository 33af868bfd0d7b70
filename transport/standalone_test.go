package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// standaloneServer is a go-sdk server whose "ask" tool elicits a name
// (default "Ada") with a context unrelated to the call, which the go-sdk
// sends on the standalone GET stream, and returns what it got. "hold"
// signals held and waits for release. gets receives once each time a GET
// handler returns (the client closed the standalone stream).
type standaloneServer struct {
	url      string
	held     chan struct{}
	release  chan struct{}
	gets     chan struct{}
	mu       sync.Mutex
	getCount int
}

func newStandaloneServer(t *testing.T) *standaloneServer {
	t.Helper()
	ss := &standaloneServer{held: make(chan struct{}, 1), release: make(chan struct{}), gets: make(chan struct{}, 16)}
	srv := mcp.NewServer(&mcp.Implementation{Name: "standalone", Version: "v0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // unrelated: the standalone stream
		defer cancel()
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message: "who are you?",
			RequestedSchema: &jsonschema.Schema{Type: "object", Properties: map[string]*jsonschema.Schema{
				"name": {Type: "string", Default: json.RawMessage(`"Ada"`)},
			}},
		})
		text := ""
		if err != nil {
			text = "elicit failed: " + err.Error()
		} else {
			b, _ := json.Marshal(map[string]any{"action": res.Action, "content": res.Content})
			text = string(b)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "hold"}, func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ss.held <- struct{}{}
		select {
		case <-ss.release:
		case <-ctx.Done():
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "held"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			ss.mu.Lock()
			ss.getCount++
			ss.mu.Unlock()
			defer func() { ss.gets <- struct{}{} }()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	ss.url = ts.URL
	return ss
}

func (ss *standaloneServer) getsOpened() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.getCount
}

func textOf(t *testing.T, res *CallResult) string {
	t.Helper()
	var content []struct{ Text string }
	if err := json.Unmarshal(res.Content, &content); err != nil || len(content) != 1 {
		t.Fatalf("content %s: %v", res.Content, err)
	}
	return content[0].Text
}

func frameLine(fs []Frame) string {
	var kinds []string
	for _, f := range fs {
		kinds = append(kinds, f.Dir+" "+f.Kind+" "+f.Method)
	}
	return strings.Join(kinds, ", ")
}

// TestStandalone_ElicitationOnGETStream: a 2025-11-25 server's
// elicitation/create on the standalone stream is answered by the call's
// policy and recorded in the call's frames; the stream is closed when the
// call ends.
func TestStandalone_ElicitationOnGETStream(t *testing.T) {
	ss := newStandaloneServer(t)
	c := newClient(t, ss.url, func(cfg *Config) { cfg.Elicitation = true })
	s := connect(t, c, nil)
	var rec recorder
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "ask", Elicitation: &ElicitationPolicy{Mode: ElicitDefaults}}, rec.sink)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got, want := textOf(t, res), `{"action":"accept","content":{"name":"Ada"}}`; got != want {
		t.Errorf("the server got %s, want %s", got, want)
	}
	want := "out request tools/call, in server_request elicitation/create, out response elicitation/create, in response "
	if got := frameLine(rec.all()); got != want {
		t.Errorf("frames %q, want %q", got, want)
	}
	select {
	case <-ss.gets:
	case <-time.After(10 * time.Second):
		t.Fatal("the standalone GET is still open after the call ended")
	}
	if n := ss.getsOpened(); n != 1 {
		t.Errorf("GETs = %d, want 1", n)
	}
}

// TestStandalone_RoutedToOldestCall: with two calls in flight, a request on
// the standalone stream is recorded and answered by the call started first;
// one stream serves both.
func TestStandalone_RoutedToOldestCall(t *testing.T) {
	ss := newStandaloneServer(t)
	c := newClient(t, ss.url, func(cfg *Config) { cfg.Elicitation = true })
	s := connect(t, c, nil)
	ctx := context.Background()
	var holdRec, askRec recorder
	holdDone := make(chan error, 1)
	go func() {
		_, err := s.CallTool(ctx, CallRequest{Tool: "hold", Elicitation: &ElicitationPolicy{Mode: ElicitValues, Values: map[string]any{"name": "Old"}}}, holdRec.sink)
		holdDone <- err
	}()
	<-ss.held
	res, err := s.CallTool(ctx, CallRequest{Tool: "ask", Elicitation: &ElicitationPolicy{Mode: ElicitDefaults}}, askRec.sink)
	if err != nil {
		t.Fatalf("CallTool ask: %v", err)
	}
	close(ss.release)
	if err := <-holdDone; err != nil {
		t.Fatalf("CallTool hold: %v", err)
	}
	if got, want := textOf(t, res), `{"action":"accept","content":{"name":"Old"}}`; got != want {
		t.Errorf("the server got %s, want %s (the oldest call's policy)", got, want)
	}
	if got := frameLine(holdRec.all()); got != "out request tools/call, in server_request elicitation/create, out response elicitation/create, in response " {
		t.Errorf("hold frames %q: want the elicitation recorded there", got)
	}
	if got := frameLine(askRec.all()); got != "out request tools/call, in response " {
		t.Errorf("ask frames %q: want no elicitation", got)
	}
	if n := ss.getsOpened(); n != 1 {
		t.Errorf("GETs = %d, want 1 (one stream while calls are in flight)", n)
	}
}

// TestStandalone_NotOfferedAsksOnce: a server answering the GET with 405
// is not asked again by the session; without a declared capability no GET
// is made.
func TestStandalone_NotOfferedAsksOnce(t *testing.T) {
	for _, tc := range []struct {
		name        string
		elicitation bool
		gets        int
	}{{"declared", true, 1}, {"undeclared", false, 0}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.NewServer(mcptest.Options{}, okTool("ok"))
			defer srv.Close()
			c := newClient(t, srv.URL, func(cfg *Config) { cfg.Elicitation = tc.elicitation })
			s := connect(t, c, nil)
			for range 3 {
				if _, err := s.CallTool(context.Background(), CallRequest{Tool: "ok"}, nil); err != nil {
					t.Fatalf("CallTool: %v", err)
				}
			}
			if got := srv.Stats().Gets; got != tc.gets {
				t.Errorf("GETs = %d, want %d", got, tc.gets)
			}
		})
	}
}

// TestStandalone_Bounded: a server that keeps asking on the standalone
// stream gets at most standaloneMaxMessages requests read from one stream
// (then the stream is closed and, the call still in flight, not reopened)
// and at most maxElicitations answers that are not declines.
func TestStandalone_Bounded(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "greedy", Version: "v0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "greedy"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		accepted, failed := 0, 0
		for range standaloneMaxMessages + 6 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "again?", RequestedSchema: &jsonschema.Schema{Type: "object",
				Properties: map[string]*jsonschema.Schema{"ok": {Type: "boolean", Default: json.RawMessage(`true`)}}}})
			cancel()
			switch {
			case err != nil:
				failed++
			case res.Action == "accept":
				accepted++
			}
		}
		b, _ := json.Marshal(map[string]int{"accepted": accepted, "failed": failed})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	c := newClient(t, ts.URL, func(cfg *Config) { cfg.Elicitation = true })
	s := connect(t, c, nil)
	var rec recorder
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "greedy", Elicitation: &ElicitationPolicy{Mode: ElicitDefaults}}, rec.sink)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if got, want := textOf(t, res), fmt.Sprintf(`{"accepted":%d,"failed":6}`, maxElicitations); got != want {
		t.Errorf("the server saw %s, want %s", got, want)
	}
	asked := 0
	for _, f := range rec.all() {
		if f.Kind == "server_request" {
			asked++
		}
	}
	if asked != standaloneMaxMessages {
		t.Errorf("%d requests recorded, want %d", asked, standaloneMaxMessages)
	}
}
