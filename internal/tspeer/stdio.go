package tspeer

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The pinned reference servers a test runs over stdio (interop/package.json).
const (
	// Everything is @modelcontextprotocol/server-everything; its first
	// argument picks the transport ("stdio").
	Everything = "server-everything"
	// Filesystem is @modelcontextprotocol/server-filesystem; its arguments
	// are the directories it may touch.
	Filesystem = "server-filesystem"
)

// StdioCommand returns the command that runs the pinned reference server
// pkg (Everything or Filesystem) as a stdio server: node by absolute path,
// the package's installed entry by absolute path, then args. Nothing is
// downloaded (no npx). A missing installation fails the test with the
// install hint; it never skips.
//
// The server's environment is agentctl's business (a stdio server gets
// only what the workflow declares plus a minimal set), and nothing it
// does listens on a socket.
func StdioCommand(tb testing.TB, pkg string, args ...string) []string {
	tb.Helper()
	in, err := locate()
	if err != nil {
		tb.Fatal(err)
	}
	entry := filepath.Join(in.root, "interop", "node_modules", "@modelcontextprotocol", pkg, "dist", "index.js")
	if _, err := os.Stat(entry); err != nil {
		tb.Fatal(fmt.Errorf("reference server %s not installed: run `%s` (missing %s)", pkg, InstallHint, entry))
	}
	return append([]string{in.node, entry}, args...)
}
