package workflow_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// TestRun_ResponseOnDiskBeforeCostlyValidation: when a result's validation
// may cost real work (here an outputSchema with $ref and oneOf), the
// response frame and call.result are committed before validation starts:
// at the moment the response is seen committed, the call has no outcome in
// the log yet. A plain schema and a small result ride with the outcome.
func TestRun_ResponseOnDiskBeforeCostlyValidation(t *testing.T) {
	costly := json.RawMessage(`{"$defs":{"n":{"oneOf":[{"type":"string"},{"type":"integer"}]}},"type":"object","properties":{"v":{"$ref":"#/$defs/n"}}}`)
	plain := json.RawMessage(`{"type":"object","properties":{"v":{"type":"integer"}}}`)
	// The same costly schema with its keywords \u-escaped: JSON decodes
	// "\u0024ref" to "$ref", so the schema is as costly as it reads decoded.
	escaped := json.RawMessage(`{"$defs":{"n":{"\u006fneOf":[{"type":"string"},{"type":"integer"}]}},"type":"object","properties":{"v":{"\u0024ref":"#/$defs/n"}}}`)
	for _, tc := range []struct {
		name        string
		schema      json.RawMessage
		ownCommit   bool
		structured  string
		wantOutcome string
	}{
		{"costly schema, valid", costly, true, `{"v":1}`, "succeeded"},
		{"costly schema, violated", costly, true, `{"v":true}`, "failed"},
		{"costly schema spelled with escapes", escaped, true, `{"v":true}`, "failed"},
		{"plain schema", plain, false, `{"v":1}`, "succeeded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, mcptest.ToolDef{Name: "s", OutputSchema: tc.schema,
				Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
					return &mcptest.Result{Content: mcptest.Text("x"), StructuredContent: json.RawMessage(tc.structured)}, nil
				}})
			db := openDB(t)
			wf := mustParse(t, oneCall(srv.URL, "s", "pure", `{}`)) // pure: a violation fails (at_most_once would end uncertain)
			var outcomeWithResponse *bool
			r := &workflow.Runner{DB: db}
			r.Observe = func(e events.Event) {
				if e.Type != vocab.FramePrefix+"response" || outcomeWithResponse != nil {
					return
				}
				// Every response frame before the call's is a session step;
				// the first one on the call's stream is the call's.
				if len(e.Stream) < 5 || e.Stream[:5] != "call/" {
					return
				}
				evs, err := db.Events(context.Background(), e.RunID)
				if err != nil {
					t.Error(err)
					return
				}
				found := false
				for _, x := range evs {
					if d := projector.Describe(x); x.Stream == e.Stream && (strings.HasSuffix(d, " ->succeeded") || strings.HasSuffix(d, " ->failed")) {
						found = true
					}
				}
				outcomeWithResponse = &found
			}
			res, err := r.Run(context.Background(), wf, nil, workflow.RunOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.State != tc.wantOutcome {
				t.Fatalf("run %s, want %s: %v", res.State, tc.wantOutcome, res.Err)
			}
			if outcomeWithResponse == nil {
				t.Fatal("no response frame observed on the call's stream")
			}
			if *outcomeWithResponse == tc.ownCommit {
				t.Fatalf("outcome committed with the response = %v, want %v", *outcomeWithResponse, !tc.ownCommit)
			}
		})
	}
}
