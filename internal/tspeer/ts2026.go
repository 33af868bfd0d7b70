package tspeer

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	ts2026Rel    = "interop/ts2026/server.mjs"
	ts2026PkgRel = "interop/node_modules/@modelcontextprotocol/server/package.json"
)

// TS2026 is a running 2026-07-28 peer: interop/ts2026/server.mjs, the
// TypeScript SDK v2 server (@modelcontextprotocol/server, pinned in
// interop/package.json) serving only 2026-07-28, with tools act and slow.
type TS2026 struct {
	URL string // the endpoint, http://127.0.0.1:PORT/mcp
}

// StartTS2026 starts the 2026-07-28 peer like Start (empty environment,
// loopback only, own process group, killed at cleanup). A missing
// installation fails the test with the install hint.
func StartTS2026(tb testing.TB) *TS2026 {
	tb.Helper()
	in, err := locate()
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(in.root, ts2026PkgRel)); err != nil {
		tb.Fatalf("TypeScript SDK v2 server not installed: run `%s` (missing %s)", InstallHint, ts2026PkgRel)
	}
	return &TS2026{URL: startNode(tb, in, filepath.Join(in.root, ts2026Rel))}
}

// Counts returns how many times each tool ran, as the server counted.
func (p *TS2026) Counts(tb testing.TB) map[string]int {
	tb.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(strings.TrimSuffix(p.URL, "/mcp") + "/counts")
	if err != nil {
		tb.Fatalf("ts2026 counts: %v", err)
	}
	defer resp.Body.Close()
	counts := map[string]int{}
	if err := json.NewDecoder(resp.Body).Decode(&counts); err != nil {
		tb.Fatalf("ts2026 counts: %v", fmt.Errorf("decode: %w", err))
	}
	return counts
}
