package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
)

func Example() {
	srv := mcptest.NewServer(mcptest.Options{}, mcptest.ToolDef{
		Name:        "add",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"}},"required":["a","b"]}`),
		Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			var in struct{ A, B int }
			_ = json.Unmarshal(c.Arguments, &in)
			return &mcptest.Result{Content: mcptest.Text(fmt.Sprint(in.A + in.B))}, nil
		},
	})
	defer srv.Close()

	c, err := transport.New(transport.Config{
		URL:    srv.URL,
		Policy: transport.Policy{AllowedSchemes: []string{"http"}, AllowPrivate: true, NetworkAllowlist: []string{"127.0.0.1"}},
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	sink := func(ctx context.Context, f transport.Frame) error {
		fmt.Println(strings.TrimSpace(f.Dir + " " + f.Kind + " " + f.Method)) // persist here
		return nil
	}
	s, err := c.Connect(ctx, sink)
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	cat, _ := s.ListTools(ctx, nil)
	tool, _ := cat.Find("add")
	args := json.RawMessage(`{"a":2,"b":3}`)
	if err := transport.ValidateArguments(tool, args); err != nil {
		panic(err)
	}
	res, err := s.CallTool(ctx, transport.CallRequest{Tool: "add", Arguments: args}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Content))
	// Output:
	// out request initialize
	// in response
	// out notification notifications/initialized
	// [{"text":"5","type":"text"}]
}
