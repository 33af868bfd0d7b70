package replay_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
	"github.com/agentctl/agentctl/workflow/replay/replaytest"
)

// twoTasks searches then gets the document found, with a header secret the
// replay must not need.
func twoTasks(url, idem string) string {
	return fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: two-tasks}
spec:
  inputs:
    query: {type: string}
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [REPLAY_TEST_TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local:
      url: %q
      timeoutSeconds: 30
      headers:
        authorization: {env: REPLAY_TEST_TOKEN}
  actions:
    act: {kind: mcp.call, idempotency: %s}
  tasks:
    - id: find
      uses: action:act
      with: {server: local, tool: search, arguments: {q: "${{ inputs.query }}"}}
    - id: fetch
      uses: action:act
      with: {server: local, tool: get, arguments: {id: "${{ tasks.find.output.id }}"}}
  outputs:
    title: "${{ tasks.fetch.output.title }}"
`, url, idem)
}

func searchTools(progress int, getErr error) []mcptest.ToolDef {
	return []mcptest.ToolDef{
		{Name: "search", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
			for i := 1; i <= progress; i++ {
				if err := c.Progress(float64(i), float64(progress), "searching"); err != nil {
					return nil, err
				}
			}
			return &mcptest.Result{Content: mcptest.Text("found"), StructuredContent: map[string]any{"id": "doc-1"}}, nil
		}},
		{Name: "get", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			if getErr != nil {
				return nil, getErr
			}
			return &mcptest.Result{Content: mcptest.Text("doc"), StructuredContent: map[string]any{"title": "Document 1"}}, nil
		}},
	}
}

func TestReplay_EqualsSourceWithoutNetwork(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		for _, tc := range []struct {
			name      string
			idem      string
			getErr    error
			fault     *mcptest.Fault
			json      bool
			wantState string
			wantCode  int
		}{
			{name: "succeeded with progress", idem: "idempotent", wantState: "succeeded"},
			{name: "json responses", idem: "pure", json: true, wantState: "succeeded"},
			{name: "session expired then redispatched", idem: "idempotent", fault: &mcptest.Fault{RPCMethod: "tools/call", Tool: "get", Nth: 1, Status: http.StatusNotFound}, wantState: "succeeded"},
			{name: "isError result", idem: "idempotent", getErr: errors.New("no such document"), wantState: "failed", wantCode: workflow.ExitFailed},
			{name: "json-rpc error", idem: "idempotent", getErr: &mcptest.RPCError{Code: -32001, Message: "backend down"}, wantState: "failed", wantCode: workflow.ExitFailed},
			{name: "5xx leaves the call uncertain", idem: "at_most_once", fault: &mcptest.Fault{RPCMethod: "tools/call", Tool: "get", Nth: 1, Status: http.StatusBadGateway}, wantState: "uncertain", wantCode: workflow.ExitUncertain},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv := mcptest.NewServer(mcptest.Options{JSONResponse: tc.json}, searchTools(3, tc.getErr)...)
				t.Cleanup(func() { srv.CheckFaults(t) }) // closed early to block the network; its faults must still have fired
				if tc.fault != nil {
					srv.Inject(*tc.fault)
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
				srv.Close()
				replaytest.BlockNetwork(t, srv.URL)

				rep := replaytest.Replay(t, db, src.RunID)
				if rep.State != src.State || rep.ExitCode != src.ExitCode || !reflect.DeepEqual(rep.Outputs, src.Outputs) {
					t.Fatalf("replay = %s (exit %d) %v, source = %s (exit %d) %v", rep.State, rep.ExitCode, rep.Outputs, src.State, src.ExitCode, src.Outputs)
				}
				want, srcDoc := replaytest.NormalInspect(t, db, src.RunID)
				got, repDoc := replaytest.NormalInspect(t, db, rep.RunID)
				if got != want {
					t.Fatalf("inspect of replay differs from the source's:\n--- replay\n%s\n--- source\n%s", got, want)
				}
				if *repDoc.Run.SourceRunID != src.RunID || repDoc.Run.Mode != "replay" {
					t.Fatalf("replay run = %+v", repDoc.Run)
				}
				for i, c := range repDoc.ProtocolCalls {
					if c.Status != "recorded" || *c.SourceRunID != src.RunID || *c.SourceEffectID != srcDoc.ProtocolCalls[i].EffectID {
						t.Fatalf("replay call %d = status %s, source %v/%v; want recorded from %s/%s", i, c.Status, c.SourceRunID, c.SourceEffectID, src.RunID, srcDoc.ProtocolCalls[i].EffectID)
					}
				}
				for _, s := range repDoc.ProtocolSessions {
					if s.Status != "recorded" || *s.SourceRunID != src.RunID {
						t.Fatalf("replay session = %+v", s)
					}
				}

				// A replay of the replay answers from the replay's evidence.
				rep2 := replaytest.Replay(t, db, rep.RunID)
				got2, rep2Doc := replaytest.NormalInspect(t, db, rep2.RunID)
				if got2 != want || *rep2Doc.Run.SourceRunID != rep.RunID {
					t.Fatalf("replay of replay differs (source %v):\n%s", rep2Doc.Run.SourceRunID, got2)
				}
			})
		}
	})
}

func TestReplay_DivergenceNamesTaskAndField(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		srv := mcptest.Start(t, mcptest.Options{}, searchTools(0, nil)...)
		db := b.Open(t, events.Options{})
		env := func(string) string { return "Bearer x-token-1234" } // at least 8 bytes: shorter secrets are refused
		src, err := (&workflow.Runner{DB: db, Getenv: env}).Run(context.Background(), mustParse(t, twoTasks(srv.URL, "pure")), map[string]any{"query": "mcp"}, workflow.RunOptions{})
		if err != nil || src.Err != nil {
			t.Fatalf("source: %v / %v", err, src.Err)
		}
		rp, err := replay.Prepare(context.Background(), db, src.RunID)
		if err != nil {
			t.Fatal(err)
		}
		// Same workflow, other input: the first call's arguments differ.
		res, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(context.Background(), rp.Workflow, map[string]any{"query": "other"}, workflow.RunOptions{Mode: "replay", SourceRunID: src.RunID})
		if err != nil {
			t.Fatal(err)
		}
		var de *workflow.DivergenceError
		if !errors.As(res.Err, &de) {
			t.Fatalf("replay err = %v, want a *DivergenceError", res.Err)
		}
		if de.TaskID != "find" || de.Field != "argumentsDigest" || de.SourceRunID != src.RunID {
			t.Fatalf("divergence = %+v", de)
		}
		if res.State != "failed" || res.ExitCode != workflow.ExitFailed {
			t.Fatalf("replay ended %s exit %d, want failed exit %d", res.State, res.ExitCode, workflow.ExitFailed)
		}
		if got := srv.Stats().Calls["search"]; got != 1 {
			t.Fatalf("server saw %d search calls, want only the source's 1", got)
		}
	})
}

func TestReplay_RefusesUnfinishedAndUnknownRuns(t *testing.T) {
	db := openDB(t)
	ctx := context.Background()
	created := vocab.RunCreated{RunID: "run-open", Workflow: "w", Digest: "sha256:0", Source: "x", Mode: "run"}
	if _, err := db.Append(ctx, "run-open", []events.Record{{Stream: "run", Type: vocab.TypeRunCreated, Payload: created}}, projector.Apply); err != nil {
		t.Fatal(err)
	}
	if _, err := replay.Prepare(ctx, db, "run-open"); !errors.Is(err, workflow.ErrRunNotFinished) || !strings.Contains(err.Error(), "run-open") {
		t.Fatalf("replay of an unfinished run: %v, want ErrRunNotFinished naming it", err)
	}
	if _, err := replay.Prepare(ctx, db, "run-nope"); !errors.Is(err, projector.ErrUnknownRun) || !strings.Contains(err.Error(), "run-nope") {
		t.Fatalf("replay of an unknown run: %v, want ErrUnknownRun naming it", err)
	}
}

// TestReplay_InspectPastTheBound: a call with more frames than inspect
// shows (256 per attempt, the last a truncation marker counting the rest):
// the replay references them, and its inspect, which reads only what it
// shows and counts the rest from the reference, equals the source's.
func TestReplay_InspectPastTheBound(t *testing.T) {
	const frames = 300
	srv := mcptest.Start(t, mcptest.Options{}, progressTool("many", frames))
	db := openDB(t)
	src, err := (&workflow.Runner{DB: db}).Run(context.Background(), mustParse(t, oneCall(srv.URL, "many", "pure", "{}")), nil, workflow.RunOptions{})
	if err != nil || src.Err != nil {
		t.Fatalf("source run: %v %v", err, src.Err)
	}
	srv.Close()
	replaytest.BlockNetwork(t, srv.URL)
	rep := replaytest.Replay(t, db, src.RunID)
	want, srcDoc := replaytest.NormalInspect(t, db, src.RunID)
	got, repDoc := replaytest.NormalInspect(t, db, rep.RunID)
	if got != want {
		t.Fatalf("inspect of replay differs from the source's:\n--- replay\n%s\n--- source\n%s", got, want)
	}
	if n := len(repDoc.StreamEvents); n != len(srcDoc.StreamEvents) || repDoc.Run.Events != srcDoc.Run.Events {
		t.Fatalf("replay shows %d stream events and %d events, source %d and %d", n, repDoc.Run.Events, len(srcDoc.StreamEvents), srcDoc.Run.Events)
	}
	last := repDoc.StreamEvents[len(repDoc.StreamEvents)-1]
	if last.Type != projector.TypeStreamTruncated || !strings.Contains(string(last.Payload), `"dropped"`) {
		t.Fatalf("last stream event %+v, want the truncation marker", last)
	}
}
