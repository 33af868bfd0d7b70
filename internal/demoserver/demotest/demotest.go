// Package demotest starts the demo MCP server for tests.
package demotest

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentctl/agentctl/internal/connstate"
	"github.com/agentctl/agentctl/internal/demoserver"
)

// StartTest starts a demoserver with opts on an httptest server bound to
// 127.0.0.1, registers its shutdown with tb.Cleanup, and returns the server
// and its endpoint URL (ending in /mcp).
func StartTest(tb testing.TB, opts demoserver.Options) (*demoserver.Server, string) {
	tb.Helper()
	return StartCounted(tb, opts, nil)
}

// StartCounted is StartTest with the server's connections counted by
// conns (nil: not counted), for a test that waits until its client closed
// them all.
func StartCounted(tb testing.TB, opts demoserver.Options, conns *connstate.Counter) (*demoserver.Server, string) {
	tb.Helper()
	s := demoserver.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("demotest: listen on 127.0.0.1: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", s.Handler())
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	if conns != nil {
		hs.Config.ConnState = conns.Hook
	}
	hs.Start()
	tb.Cleanup(func() {
		for ss := range s.MCPServer().Sessions() {
			_ = ss.Close()
		}
		hs.CloseClientConnections()
		hs.Close()
	})
	return s, hs.URL + "/mcp"
}
