// Command agentctl runs workflows that call tools on remote MCP servers and
// records every protocol step in a SQLite event log.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A write to a closed stdout returns EPIPE instead of killing the
	// process with SIGPIPE mid-run: the run then ends recorded (see runner).
	signal.Ignore(syscall.SIGPIPE)
	fitProcs = fitProcsToLanes
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
