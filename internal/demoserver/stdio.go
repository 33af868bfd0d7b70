package demoserver

import (
	"context"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServeStdio serves one MCP session over newline-delimited JSON-RPC on r
// and w (a stdio server: os.Stdin and os.Stdout) until the client closes
// r or ctx ends.
func (s *Server) ServeStdio(ctx context.Context, r io.ReadCloser, w io.WriteCloser) error {
	return s.mcp.Run(ctx, &mcp.IOTransport{Reader: r, Writer: w})
}
