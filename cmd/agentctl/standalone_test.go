package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentctl/agentctl/internal/testkit"
)

// TestCLI_StandaloneElicitation: a go-sdk server (2025-11-25) whose tool
// elicits with a context unrelated to the call, so the request travels on
// the standalone GET stream. `mcp call --elicitation defaults` answers it
// and records the request and the answer as the call's frames; the replay
// reproduces the run from the log, sending nothing.
func TestCLI_StandaloneElicitation(t *testing.T) {
	t.Parallel()
	srv := mcp.NewServer(&mcp.Implementation{Name: "standalone", Version: "v0"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "ask"}, func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // unrelated: the standalone stream
		defer cancel()
		res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "who?", RequestedSchema: &jsonschema.Schema{Type: "object",
			Properties: map[string]*jsonschema.Schema{"name": {Type: "string", Default: json.RawMessage(`"Ada"`)}}}})
		if err != nil {
			return nil, nil, err
		}
		b, _ := json.Marshal(res.Content)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(b)}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var hits atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	db := testkit.Backends(t)[0].DSN(t)
	out, stderr, code := cli(t, "mcp", "call", ts.URL, "ask", "--elicitation", "defaults", "--allow-private", "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, `{\"name\":\"Ada\"}`) {
		t.Fatalf("mcp call: exit %d\n%s\n%s", code, out, stderr)
	}
	runID := runIDs(t, db)[0]
	lines := describeAll(logOf(t, db, runID))
	i := slices.Index(lines, "mcp.server_request in elicitation/create")
	if i < 0 || i+1 >= len(lines) || lines[i+1] != "mcp.response out elicitation/create" {
		t.Fatalf("the elicitation and its answer are not recorded in order:\n%s", strings.Join(lines, "\n"))
	}
	before := hits.Load()
	if code, _, _ := replayCLI(t, db, runID); code != 0 {
		t.Fatalf("replay: exit %d", code)
	}
	if n := hits.Load() - before; n != 0 {
		t.Errorf("the replay sent %d requests", n)
	}
}
