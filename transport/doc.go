// Package transport is agentctl's MCP client for the Streamable HTTP
// transport, protocol version 2025-11-25 only.
//
// Design notes are at the end of this comment (lifecycle, error taxonomy,
// concurrency).
package transport
