// Package e2e holds agentctl's end-to-end interoperability tests: workflows
// run through workflow.Runner and through the agentctl binary against real
// MCP servers on 127.0.0.1, namely the official Go SDK server
// (internal/demoserver) and the reference TypeScript "everything" server
// (internal/tspeer, installed with `npm ci --prefix interop`).
//
// The package has no non-test code; see docs/INTEROP.md for the scenarios,
// their results and how to run them.
package e2e
