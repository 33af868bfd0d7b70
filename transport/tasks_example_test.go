package transport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// A tool that must run as an MCP task: create it, persist its id (and the
// session id, sealed), poll honouring pollInterval, fetch the result.
func ExampleSession_CallToolTask() {
	srv := mcptest.NewServer(mcptest.Options{Tasks: &mcptest.TaskOptions{PollInterval: 10, WorkingPolls: 2}}, mcptest.ToolDef{
		Name:      "report",
		Execution: json.RawMessage(`{"taskSupport":"required"}`),
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("4 stages")}, nil
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
	s, err := c.Connect(ctx, nil)
	if err != nil {
		panic(err)
	}
	defer s.Close(ctx)
	cat, _ := s.ListTools(ctx, nil)
	tool, _ := cat.Find("report")
	fmt.Println(tool.TaskSupport(), s.ToolCallTasks())

	call, err := s.CallToolTask(ctx, transport.CallRequest{Tool: "report"}, time.Hour, nil)
	if err != nil {
		panic(err)
	}
	// Persist call.Task.ID and s.SessionID() here: from now on the call is
	// asked about (PollTask, or Reattach after a restart), never resent.
	last, err := s.PollTask(ctx, call.Task, nil, func(t *transport.Task) error {
		fmt.Println("poll:", t.Status)
		return nil
	})
	if err != nil {
		panic(err)
	}
	res, err := s.TaskResult(ctx, last.ID, nil)
	if err != nil {
		panic(err)
	}
	fmt.Println(string(res.Content))
	// Output:
	// required true
	// poll: working
	// poll: working
	// poll: completed
	// [{"text":"4 stages","type":"text"}]
}
