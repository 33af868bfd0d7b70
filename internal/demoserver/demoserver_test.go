package demoserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const protocolVersion = "2025-11-25"

func connect(t *testing.T, url string, copts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	if copts == nil {
		copts = &mcp.ClientOptions{}
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "peer-test", Version: "0"}, copts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: protocolVersion})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("call %s: %v", name, err)
	}
	return res
}

func structured(t *testing.T, res *mcp.CallToolResult, into any) {
	t.Helper()
	if res.IsError {
		t.Fatalf("unexpected isError result: %+v", res.Content)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("structuredContent %s: %v", b, err)
	}
}

func errText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if !res.IsError {
		t.Fatalf("expected isError result, got %+v", res)
	}
	if len(res.Content) == 0 {
		t.Fatal("isError result without content")
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("content[0] is %T", res.Content[0])
	}
	return tc.Text
}

func TestToolsAllModes(t *testing.T) {
	for _, opts := range []demoserver.Options{
		{},
		{JSONResponse: true},
		{Stateless: true},
		{Stateless: true, JSONResponse: true},
	} {
		t.Run(fmt.Sprintf("stateless=%v,json=%v", opts.Stateless, opts.JSONResponse), func(t *testing.T) {
			srv, url := demotest.StartTest(t, opts)
			cs := connect(t, url, nil)

			ir := cs.InitializeResult()
			if ir.ServerInfo.Name != "agentctl-demo" || ir.ServerInfo.Version != "1.0.0" {
				t.Errorf("serverInfo = %+v", ir.ServerInfo)
			}
			if ir.ProtocolVersion != protocolVersion {
				t.Errorf("protocolVersion = %q", ir.ProtocolVersion)
			}

			var tools []string
			ctx := context.Background()
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				if tool.OutputSchema == nil && tool.Name != "fail" {
					t.Errorf("tool %s has no output schema", tool.Name)
				}
				tools = append(tools, tool.Name)
			}
			slices.Sort(tools)
			want := slices.Sorted(slices.Values(demoserver.ToolNames))
			if !slices.Equal(tools, want) {
				t.Fatalf("tools = %v, want %v", tools, want)
			}

			var so demoserver.SearchOutput
			structured(t, call(t, cs, "search", map[string]any{"q": "golang"}), &so)
			if so.ID != demoserver.DocID("golang") || !strings.HasPrefix(so.ID, "doc-") || len(so.ID) != 12 || so.Title != "About golang" || so.Score != 0.9 {
				t.Errorf("search = %+v", so)
			}

			var g demoserver.GetOutput
			structured(t, call(t, cs, "get", map[string]any{"id": so.ID}), &g)
			if g.ID != so.ID || g.Title == "" || !strings.Contains(g.Body, g.Title) {
				t.Errorf("get = %+v", g)
			}
			if msg := errText(t, call(t, cs, "get", map[string]any{"id": "nope"})); msg != "no document nope" {
				t.Errorf("get unknown: %q", msg)
			}

			var a demoserver.AnalyzeOutput
			structured(t, call(t, cs, "analyze", map[string]any{"text": "one two three four"}), &a)
			if a.Words != 4 || a.Steps != 3 {
				t.Errorf("analyze = %+v", a)
			}
			if res := call(t, cs, "analyze", map[string]any{"text": "x", "steps": 21}); !res.IsError {
				t.Errorf("analyze steps=21 accepted: %+v", res)
			}

			var e demoserver.Message
			structured(t, call(t, cs, "echo", map[string]any{"message": "hi"}), &e)
			if e.Message != "hi" {
				t.Errorf("echo = %+v", e)
			}

			if msg := errText(t, call(t, cs, "fail", map[string]any{"message": "boom"})); msg != "boom" {
				t.Errorf("fail: %q", msg)
			}

			for i := int64(1); i <= 3; i++ {
				var c demoserver.CounterOutput
				structured(t, call(t, cs, "counter", map[string]any{}), &c)
				if c.Count != i {
					t.Errorf("counter = %d, want %d", c.Count, i)
				}
			}

			for tool, want := range map[string]int64{"search": 1, "get": 2, "analyze": 1, "echo": 1, "fail": 1, "counter": 3, "bad_output": 0, "unknown": 0} {
				if got := srv.Calls(tool); got != want {
					t.Errorf("Calls(%s) = %d, want %d", tool, got, want)
				}
			}
		})
	}
}

// TestBadOutput checks that bad_output really violates its declared schema,
// using raw JSON-RPC so no client-side validation interferes.
func TestBadOutput(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{JSONResponse: true, Stateless: true})
	tl := rawRPC(t, url, "", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	var list struct {
		Result struct {
			Tools []struct {
				Name         string          `json:"name"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(tl, &list); err != nil {
		t.Fatalf("%s: %v", tl, err)
	}
	var schema string
	for _, tool := range list.Result.Tools {
		if tool.Name == "bad_output" {
			schema = string(tool.OutputSchema)
		}
	}
	if !strings.Contains(schema, `"integer"`) || !strings.Contains(schema, `"required":["n"]`) {
		t.Fatalf("bad_output outputSchema = %s", schema)
	}
	body := rawRPC(t, url, "", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"bad_output","arguments":{}}}`)
	if !strings.Contains(string(body), `"structuredContent":{"n":"x"}`) {
		t.Fatalf("bad_output result = %s", body)
	}
	if srv.Calls("bad_output") != 1 {
		t.Errorf("Calls(bad_output) = %d", srv.Calls("bad_output"))
	}
}

// TestProgressInOrder reads the raw SSE stream of an analyze call: the go-sdk
// client dispatches notifications asynchronously, so only the wire shows the
// order the server sent them in.
func TestProgressInOrder(t *testing.T) {
	for _, stateless := range []bool{false, true} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			_, url := demotest.StartTest(t, demoserver.Options{Stateless: stateless})
			session := ""
			if !stateless {
				session = rawInitialize(t, url)
			}
			code, body := rawPost(t, url, session, `{"jsonrpc":"2.0","id":"c1","method":"tools/call","params":{"name":"analyze","arguments":{"text":"a b","steps":5},"_meta":{"progressToken":"tok-1"}}}`)
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			msgs := sseData(t, body)
			if len(msgs) != 6 {
				t.Fatalf("got %d SSE messages, want 5 progress + 1 result: %s", len(msgs), body)
			}
			for i, m := range msgs[:5] {
				var n struct {
					Method string                         `json:"method"`
					Params mcp.ProgressNotificationParams `json:"params"`
				}
				if err := json.Unmarshal(m, &n); err != nil {
					t.Fatal(err)
				}
				p := n.Params
				if n.Method != "notifications/progress" || p.ProgressToken != "tok-1" || p.Progress != float64(i+1) || p.Total != 5 || p.Message != fmt.Sprintf("step %d/5", i+1) {
					t.Errorf("message %d = %s", i, m)
				}
			}
			var r struct {
				ID     string `json:"id"`
				Result struct {
					StructuredContent demoserver.AnalyzeOutput `json:"structuredContent"`
				} `json:"result"`
			}
			if err := json.Unmarshal(msgs[5], &r); err != nil {
				t.Fatal(err)
			}
			if r.ID != "c1" || r.Result.StructuredContent != (demoserver.AnalyzeOutput{Words: 2, Steps: 5}) {
				t.Errorf("result = %s", msgs[5])
			}
		})
	}
}

// TestProgressClient checks the go-sdk client receives all notifications.
func TestProgressClient(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	var mu sync.Mutex
	var got []float64
	all := make(chan struct{})
	cs := connect(t, url, &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, req.Params.Progress)
			if len(got) == 4 {
				close(all)
			}
		},
	})
	params := &mcp.CallToolParams{Name: "analyze", Arguments: map[string]any{"text": "a", "steps": 4}}
	params.SetProgressToken(42)
	res := func() *mcp.CallToolResult {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := cs.CallTool(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}()
	var a demoserver.AnalyzeOutput
	structured(t, res, &a)
	select {
	case <-all:
	case <-time.After(10 * time.Second):
		t.Fatal("progress notifications missing")
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(got)
	if !slices.Equal(got, []float64{1, 2, 3, 4}) {
		t.Errorf("progress = %v", got)
	}
}

func TestPagedToolsList(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{PageSize: 2})
	cs := connect(t, url, nil)
	ctx := context.Background()
	var names []string
	pages := 0
	cursor := ""
	for {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(res.Tools) > 2 {
			t.Fatalf("page %d has %d tools", pages, len(res.Tools))
		}
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
		if pages > 10 {
			t.Fatal("too many pages")
		}
	}
	if want := (len(demoserver.ToolNames) + 1) / 2; pages != want {
		t.Errorf("pages = %d, want %d", pages, want)
	}
	slices.Sort(names)
	if want := slices.Sorted(slices.Values(demoserver.ToolNames)); !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
}

func TestSessionTimeout404(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{SessionTimeout: 50 * time.Millisecond})
	cs := connect(t, url, nil)
	id := cs.ID()
	if id == "" {
		t.Fatal("no session id")
	}
	// Poll (bounded) until the idle session has expired.
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := rawPost(t, url, id, `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`)
		if code == http.StatusNotFound {
			return
		}
		if code != http.StatusOK {
			t.Fatalf("unexpected status %d", code)
		}
		if time.Now().After(deadline) {
			t.Fatal("session never expired")
		}
		// Each successful request resets the idle timer: wait longer than
		// the timeout before the next probe.
		<-time.After(100 * time.Millisecond)
	}
}

func TestServeRefusesNonLoopback(t *testing.T) {
	s := demoserver.New(demoserver.Options{})
	for _, addr := range []string{":0", "0.0.0.0:0", "[::]:0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		if _, _, err := s.Serve(context.Background(), addr); err == nil {
			t.Errorf("Serve(%q) accepted", addr)
		}
	}
	url, stop, err := s.Serve(context.Background(), "localhost:0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/mcp") {
		t.Errorf("url = %q", url)
	}
	cs := connect(t, url, nil)
	var e demoserver.Message
	structured(t, call(t, cs, "echo", map[string]any{"message": "served"}), &e)
	if e.Message != "served" {
		t.Errorf("echo = %+v", e)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		t.Errorf("stop: %v", err)
	}
}

func rawPost(t *testing.T, url, session, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", protocolVersion)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// rawInitialize performs initialize + notifications/initialized and returns
// the session id.
func rawInitialize(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("initialize: status %d, session %q: %s", resp.StatusCode, id, b)
	}
	if code, b := rawPost(t, url, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: status %d: %s", code, b)
	}
	return id
}

// sseData returns the data payloads of the SSE events in body.
func sseData(t *testing.T, body []byte) []json.RawMessage {
	t.Helper()
	var out []json.RawMessage
	for ev := range strings.SplitSeq(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n") {
		var data []string
		for line := range strings.SplitSeq(ev, "\n") {
			if d, ok := strings.CutPrefix(line, "data:"); ok {
				data = append(data, strings.TrimPrefix(d, " "))
			}
		}
		if len(data) > 0 {
			out = append(out, json.RawMessage(strings.Join(data, "\n")))
		}
	}
	return out
}

func rawRPC(t *testing.T, url, session, body string) []byte {
	t.Helper()
	code, b := rawPost(t, url, session, body)
	if code != http.StatusOK {
		t.Fatalf("status %d: %s", code, b)
	}
	return b
}
