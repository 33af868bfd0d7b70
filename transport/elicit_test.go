package transport

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// elicitServer is a go-sdk server whose "signup" tool asks the client for
// a name (default "Ada"), an age (default 36, required) and a plan (enum)
// and returns what it got, or the action when not accepted.
func elicitServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "elicit", Version: "v0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "signup"}, func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{
			Message: "who are you?",
			RequestedSchema: &jsonschema.Schema{Type: "object", Required: []string{"age"}, Properties: map[string]*jsonschema.Schema{
				"name": {Type: "string", Default: json.RawMessage(`"Ada"`)},
				"age":  {Type: "integer", Default: json.RawMessage(`36`)},
				"plan": {Type: "string", Enum: []any{"free", "pro"}},
			}},
		})
		if err != nil {
			return nil, nil, err
		}
		b, _ := json.Marshal(map[string]any{"action": res.Action, "content": res.Content})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts
}

// TestElicitation_AnswersByPolicy: with the capability declared, each
// call answers the go-sdk server's elicitation/create by its own policy,
// and the answer is an "out" response frame recorded before it is sent.
func TestElicitation_AnswersByPolicy(t *testing.T) {
	ts := elicitServer(t)
	const declined = `{"action":"decline","content":null}` // as the tool reports it
	for _, tc := range []struct {
		name   string
		policy *ElicitationPolicy
		want   string
	}{
		{"defaults", &ElicitationPolicy{Mode: ElicitDefaults}, `{"action":"accept","content":{"age":36,"name":"Ada"}}`},
		{"values", &ElicitationPolicy{Mode: ElicitValues, Values: map[string]any{"name": "Grace", "plan": "pro"}}, `{"action":"accept","content":{"age":36,"name":"Grace","plan":"pro"}}`},
		{"value outside the enum is left out", &ElicitationPolicy{Mode: ElicitValues, Values: map[string]any{"plan": "gold"}}, `{"action":"accept","content":{"age":36,"name":"Ada"}}`},
		{"wrong type for a required field declines", &ElicitationPolicy{Mode: ElicitValues, Values: map[string]any{"age": "old"}}, declined},
		{"decline", &ElicitationPolicy{Mode: ElicitDecline}, declined},
		{"no policy declines", nil, declined},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(Config{URL: ts.URL, Policy: localPolicy(), Elicitation: true})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			s, err := c.Connect(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close(ctx)
			var rec recorder
			res, err := s.CallTool(ctx, CallRequest{Tool: "signup", Elicitation: tc.policy}, rec.sink)
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			var content []struct{ Text string }
			if err := json.Unmarshal(res.Content, &content); err != nil || len(content) != 1 {
				t.Fatalf("content %s: %v", res.Content, err)
			}
			if content[0].Text != tc.want {
				t.Errorf("the server got %s, want %s", content[0].Text, tc.want)
			}
			var kinds []string
			for _, f := range rec.all() {
				kinds = append(kinds, f.Dir+" "+f.Kind+" "+f.Method)
			}
			if got := strings.Join(kinds, ", "); !strings.Contains(got, "in server_request elicitation/create, out response elicitation/create") {
				t.Errorf("frames %s: want the request and its answer recorded in order", got)
			}
		})
	}
}

// TestElicitation_UndeclaredIsMethodNotFound: without the capability the
// client never answers an elicitation (the go-sdk server refuses to ask).
func TestElicitation_UndeclaredIsMethodNotFound(t *testing.T) {
	ts := elicitServer(t)
	c, err := New(Config{URL: ts.URL, Policy: localPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s, err := c.Connect(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	res, err := s.CallTool(ctx, CallRequest{Tool: "signup", Elicitation: &ElicitationPolicy{Mode: ElicitDefaults}}, nil)
	if err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if !res.IsError || !strings.Contains(string(res.Content), "elicitation") {
		t.Errorf("result %s: want the tool's error about the undeclared capability", res.Content)
	}
}

// TestElicitResult covers the answer rules on request shapes a peer may send.
func TestElicitResult(t *testing.T) {
	p := &ElicitationPolicy{Mode: ElicitDefaults}
	for _, tc := range []struct{ params, want string }{
		{`{"mode":"url","url":"https://x.example","message":"m","elicitationId":"1"}`, `{"action":"decline"}`},
		{`{"message":"m","requestedSchema":{"type":"object","properties":{"n":{"type":"number","default":9.5},"b":{"type":"boolean","default":true}}}}`, `{"action":"accept","content":{"b":true,"n":9.5}}`},
		{`{"message":"m","requestedSchema":{"type":"object","properties":{"n":{"type":"string"}},"required":["n"]}}`, `{"action":"decline"}`},
		{`{"message":"m","requestedSchema":{"type":"object","properties":{"i":{"type":"integer","default":1.5}}}}`, `{"action":"accept","content":{}}`},
		{`not json`, `{"action":"decline"}`},
	} {
		if got := string(p.elicitResult(json.RawMessage(tc.params))); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.params, got, tc.want)
		}
	}
}
