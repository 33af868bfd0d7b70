package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// askTool sends one server request on its response stream, waits for the
// client's answer when wait is set, and returns the answer's error code as
// structured content.
func askTool(method string, id json.RawMessage, wait bool) mcptest.ToolDef {
	return mcptest.ToolDef{Name: "ask", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		if err := c.Request(method, id, map[string]any{}); err != nil {
			return nil, err
		}
		if !wait {
			return &mcptest.Result{Content: mcptest.Text("done")}, nil
		}
		cr, err := c.AwaitResponse(ctx, id)
		if err != nil {
			return nil, err
		}
		out := map[string]any{"result": cr.Result}
		if cr.Error != nil {
			out["code"] = cr.Error.Code
		}
		return &mcptest.Result{Content: mcptest.Text("answered"), StructuredContent: out}, nil
	}}
}

func TestServerRequestAnsweredWithMethodNotFound(t *testing.T) {
	id := json.RawMessage(`"srv-1"`)
	srv := mcptest.Start(t, mcptest.Options{}, askTool("roots/list", id, true))
	c := newClient(t, srv.URL, func(c *Config) {
		c.Headers = map[string]SecretRef{"Authorization": {Env: "TOKEN"}}
		c.Policy.EnvironmentAllowlist = []string{"TOKEN"}
		c.Getenv = func(string) string { return "Bearer s3cret-token" }
	})
	s := connect(t, c, nil)
	var rec recorder
	sink := func(ctx context.Context, f Frame) error {
		if f.Dir == "out" && f.Kind == "response" && len(srv.Stats().Responses) != 0 {
			t.Errorf("the reply reached the server before the sink had it")
		}
		return rec.sink(ctx, f)
	}
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "ask"}, sink)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.StructuredContent) != `{"code":-32601,"result":null}` {
		t.Errorf("the server saw the answer as %s", res.StructuredContent)
	}

	fr := rec.all()
	var kinds []string
	for _, f := range fr {
		kinds = append(kinds, f.Dir+" "+f.Kind)
	}
	if got := strings.Join(kinds, ", "); got != "out request, in server_request, out response, in response" {
		t.Fatalf("frames = %s", got)
	}
	reply := fr[2]
	if reply.Method != "roots/list" || string(reply.ID) != `"srv-1"` || reply.HTTPStatus != 0 {
		t.Errorf("reply frame = %+v", reply)
	}
	want := `{"jsonrpc":"2.0","id":"srv-1","error":{"code":-32601,"message":"method not found: agentctl declares no client capabilities"}}`
	if string(reply.Body) != want {
		t.Errorf("reply body = %s\nwant %s", reply.Body, want)
	}

	st := srv.Stats()
	if len(st.Responses) != 1 {
		t.Fatalf("server got %d responses, want 1", len(st.Responses))
	}
	got := st.Responses[0]
	if string(got.ID) != `"srv-1"` || got.Error == nil || got.Error.Code != -32601 || got.Error.Message != msgNoCapabilities || got.Result != nil {
		t.Errorf("server got %+v (error %+v)", got, got.Error)
	}
	if got.Session == "" || got.Header.Get("Mcp-Protocol-Version") != ProtocolVersion || got.Header.Get("Origin") != Origin ||
		got.Header.Get("Authorization") != "Bearer s3cret-token" {
		t.Errorf("reply headers = %v (session %q)", got.Header, got.Session)
	}
	if st.Calls["ask"] != 1 || st.Posts != 4 { // initialize, initialized, tools/call, the reply
		t.Errorf("calls %d posts %d, want 1 4", st.Calls["ask"], st.Posts)
	}
	for _, f := range fr {
		if strings.Contains(string(f.Body), "s3cret") {
			t.Errorf("secret in frame %+v", f)
		}
	}
}

func TestServerPingAnswered(t *testing.T) {
	id := json.RawMessage(`7`)
	srv := mcptest.Start(t, mcptest.Options{}, askTool("ping", id, true))
	s := connect(t, newClient(t, srv.URL, nil), nil)
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "ask"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.StructuredContent) != `{"result":{}}` {
		t.Errorf("ping answered %s, want an empty result", res.StructuredContent)
	}
}

// The reply is best-effort: a server refusing it does not fail the call.
func TestServerRequestReplyRefused(t *testing.T) {
	id := json.RawMessage(`"srv-9"`)
	srv := mcptest.Start(t, mcptest.Options{}, askTool("sampling/createMessage", id, false))
	// POSTs: initialize, initialized, tools/call, then the reply.
	srv.Inject(mcptest.Fault{HTTPMethod: "POST", Nth: 4, Status: http.StatusInternalServerError})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	var rec recorder
	res, err := s.CallTool(context.Background(), CallRequest{Tool: "ask"}, rec.sink)
	if err != nil {
		t.Fatalf("a refused reply failed the call: %v", err)
	}
	if !strings.Contains(string(res.Content), "done") {
		t.Errorf("content = %s", res.Content)
	}
	if st := srv.Stats(); len(st.Responses) != 1 || string(st.Responses[0].ID) != `"srv-9"` || st.Calls["ask"] != 1 {
		t.Errorf("responses %+v calls %d", st.Responses, st.Calls["ask"])
	}
	if n := len(rec.all()); n != 4 {
		t.Errorf("%d frames, want 4 (no http_error frame for the reply)", n)
	}
}
