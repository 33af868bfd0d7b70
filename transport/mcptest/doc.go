// Package mcptest is a deterministic, scriptable MCP server (Streamable
// HTTP, protocol 2025-11-25) for tests and demos. It listens on 127.0.0.1
// only, speaks just enough of the protocol (initialize, initialized,
// tools/list with pages, tools/call dispatched to Go handlers, ping, DELETE,
// GET resumption with Last-Event-ID, server requests and the client's
// responses to them) and injects faults keyed by HTTP method, session,
// JSON-RPC method, tool and call number. Tools can be added, changed and
// removed; sessions see the tool set of their initialize.
//
// Everything is synchronised with channels, never with sleeps: a Fault's
// Gate releases one SSE event per receive, Hang holds a request until the
// channel is closed, and a Handler can block on whatever the test gives it.
// [Server.Stats] tells exactly what the server saw.
//
//	srv := mcptest.Start(t, mcptest.Options{PageSize: 2},
//		mcptest.ToolDef{Name: "add", Handler: func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
//			_ = c.Progress(1, 2, "halfway")
//			return &mcptest.Result{Content: mcptest.Text("3")}, nil
//		}})
//	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusUnauthorized, Nth: 1}) // 401 once
//	// ... point the client at srv.URL ...
//	if got := srv.Stats().Calls["add"]; got != 2 { t.Errorf("calls = %d", got) }
package mcptest
