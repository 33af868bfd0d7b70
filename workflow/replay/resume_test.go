package replay_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay/replaytest"
)

// TestReplay_ResumeAndServerRequests: runs whose evidence holds a resumed
// stream ("mcp.resume" frames, an http_error on the resume GET) or a server
// request and agentctl's answer ("mcp.server_request" in, "mcp.response"
// out) are stored, inspected and replayed like any other: the replay
// reproduces the outcome and the inspect document without the network.
func TestReplay_ResumeAndServerRequests(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		asking := searchTools(1, nil)
		asking[0].Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			id := json.RawMessage(`"srv-1"`)
			if err := c.Request("roots/list", id, map[string]any{}); err != nil {
				return nil, err
			}
			if _, err := c.AwaitResponse(ctx, id); err != nil {
				return nil, err
			}
			return &mcptest.Result{Content: mcptest.Text("found"), StructuredContent: map[string]any{"id": "doc-1"}}, nil
		}
		cut := mcptest.Fault{RPCMethod: "tools/call", Tool: "get", Nth: 1, CloseAfterPriming: true, Retry: 1}
		for _, tc := range []struct {
			name      string
			tools     []mcptest.ToolDef
			faults    []mcptest.Fault
			idem      string
			wantState string
			wantCode  int
			wantTypes []string // event types the source run must hold
		}{
			{name: "stream resumed", tools: searchTools(2, nil), faults: []mcptest.Fault{cut}, idem: "at_most_once",
				wantState: "succeeded", wantTypes: []string{"mcp.resume out tools/call"}},
			{name: "resumed twice then lost", tools: searchTools(0, nil), idem: "at_most_once",
				faults:    []mcptest.Fault{cut, {HTTPMethod: "GET", CloseAfterPriming: true, Retry: 1}},
				wantState: "uncertain", wantCode: workflow.ExitUncertain, wantTypes: []string{"mcp.resume out tools/call"}},
			{name: "resume refused twice with 401", tools: searchTools(0, nil), idem: "idempotent",
				faults:    []mcptest.Fault{cut, {HTTPMethod: "GET", Status: http.StatusUnauthorized}},
				wantState: "uncertain", wantCode: workflow.ExitUncertain, wantTypes: []string{"mcp.resume out tools/call", "mcp.http_error in tools/call"}},
			{name: "server request answered", tools: asking, idem: "idempotent",
				wantState: "succeeded", wantTypes: []string{"mcp.server_request in roots/list", "mcp.response out roots/list"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv := mcptest.NewServer(mcptest.Options{}, tc.tools...)
				t.Cleanup(func() { srv.CheckFaults(t) }) // closed early to block the network; its faults must still have fired
				for _, f := range tc.faults {
					srv.Inject(f)
				}
				db := b.Open(t, events.Options{})
				wf := mustParse(t, twoTasks(srv.URL, tc.idem))
				src, err := (&workflow.Runner{DB: db, Getenv: func(string) string { return "Bearer s3cret-token" }}).Run(context.Background(), wf, map[string]any{"query": "mcp"}, workflow.RunOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if src.State != tc.wantState || src.ExitCode != tc.wantCode {
					t.Fatalf("source run = %s (exit %d, %v), want %s (exit %d)", src.State, src.ExitCode, src.Err, tc.wantState, tc.wantCode)
				}
				got := describeRun(t, db, src.RunID)
				for _, want := range tc.wantTypes {
					if !slices.Contains(got, want) {
						t.Fatalf("source events lack %q:\n%v", want, got)
					}
				}
				srv.Close()
				replaytest.BlockNetwork(t, srv.URL)

				rep := replaytest.Replay(t, db, src.RunID)
				if rep.State != src.State || rep.ExitCode != src.ExitCode || !reflect.DeepEqual(rep.Outputs, src.Outputs) {
					t.Fatalf("replay = %s (exit %d) %v, source = %s (exit %d) %v", rep.State, rep.ExitCode, rep.Outputs, src.State, src.ExitCode, src.Outputs)
				}
				want, _ := replaytest.NormalInspect(t, db, src.RunID)
				gotDoc, _ := replaytest.NormalInspect(t, db, rep.RunID)
				if gotDoc != want {
					t.Fatalf("inspect of replay differs from the source's:\n--- replay\n%s\n--- source\n%s", gotDoc, want)
				}
				if !slices.Equal(testkit.EvidenceGroups(describeRun(t, db, rep.RunID))[1:], testkit.EvidenceGroups(got)[1:]) {
					t.Fatalf("replay events differ:\n%v\nsource:\n%v", describeRun(t, db, rep.RunID), got)
				}
			})
		}
	})
}
