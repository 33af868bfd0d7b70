package workflow_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// bigOutput is the text the "big" tool answers with, in its content (as
// text) and its structuredContent: its size dominates a call's bytes.
var bigOutput = strings.Repeat("0123456789abcdef", 256) // 4 KiB

// bigTool answers every call with bigOutput.
func bigTool() mcptest.ToolDef {
	return mcptest.ToolDef{Name: "big", OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text(bigOutput), StructuredContent: map[string]string{"text": bigOutput}}, nil
		}}
}

// maxPlainCallBytes is the ceiling TestCallOutputStoredOnce holds for the
// payloads of one plain call of bigTool: the response frame holds its
// output twice (content text and structuredContent, as the server sent
// them), and everything else stays under 1.5 KiB. An output stored again
// in call.result or task.finished (4 KiB each) breaks it, and so do the
// frames' effect ids (about 80 bytes each) written again.
var maxPlainCallBytes = 2*len(bigOutput) + 1536

// TestCallOutputStoredOnce pins the bytes of a plain call (issue 34 item
// 4): the tool's output is in its response frame and nowhere else, the
// call's frames leave out the effect id their stream names (inspect still
// shows it), the run's outputs are the tool's, and a replay of the run (no
// network) produces them again.
func TestCallOutputStoredOnce(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, bigTool())
	db := openDB(t)
	wf := mustParse(t, testkit.Workflow{URL: srv.URL, Tasks: []testkit.Task{{ID: "a", Idempotency: "idempotent", Tool: "big"}},
		Outputs: []testkit.Output{{Name: "text", Value: "${{ tasks.a.output.text }}"}}}.YAML())
	res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil || res.Err != nil {
		t.Fatalf("run: %v %v", err, res.Err)
	}
	if res.Outputs["text"] != bigOutput {
		t.Fatalf("output text is %d bytes, want the tool's %d", len(res.Outputs["text"].(string)), len(bigOutput))
	}
	evs, err := db.Events(context.Background(), res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	var total int
	var types []string
	for _, e := range evs {
		if !strings.HasPrefix(e.Stream, "call/") && !strings.HasPrefix(e.Stream, "task/") {
			continue
		}
		total += len(e.Payload)
		types = append(types, e.Type)
		if n := strings.Count(e.Payload, bigOutput); n > 0 && e.Type != vocab.FramePrefix+"response" {
			t.Errorf("%s at seq %d holds the output %d times; only the response frame should", e.Type, e.Seq, n)
		}
		if vocab.IsFrame(e.Type) && strings.Contains(e.Payload, `"effectId"`) {
			t.Errorf("%s at seq %d repeats the effect id its stream %s names", e.Type, e.Seq, e.Stream)
		}
	}
	// Readers see the effect id of the call's frames as before.
	doc := inspectDoc(t, db, res.RunID)
	var frames int
	for _, se := range doc.StreamEvents {
		if strings.HasPrefix(se.Stream, "call/") {
			frames++
			if se.EffectID == nil || "call/"+*se.EffectID != se.Stream {
				t.Errorf("inspect shows frame %d of %s with effect id %v", se.Seq, se.Stream, se.EffectID)
			}
		}
	}
	if frames != 2 {
		t.Errorf("inspect shows %d frames of the call, want its request and response", frames)
	}
	t.Logf("one plain call: %d payload bytes in %v", total, types)
	if total > maxPlainCallBytes {
		t.Errorf("one plain call writes %d payload bytes, want ≤ %d (output %d bytes)", total, maxPlainCallBytes, len(bigOutput))
	}
	srv.Close()
	blockNetwork(t, srv.URL)
	if rep := replayOf(t, db, res.RunID); rep.Outputs["text"] != bigOutput {
		t.Fatalf("replay output text is %v bytes, want the tool's", len(rep.Outputs["text"].(string)))
	}
}

// TestResumeRestoresOutputStoredOnce: a task's output that the log keeps
// only in its call's response frame is what a resumed run's next task
// gets: the run fails at its second task (HTTP 400, definitive), resume
// --retry-failed renders the second task's arguments from the first task's
// recorded output, and the second call carries it.
func TestResumeRestoresOutputStoredOnce(t *testing.T) {
	var mu sync.Mutex
	var got []string
	echo := mcptest.ToolDef{Name: "echo", Handler: func(_ context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		var a struct{ Text string }
		if err := json.Unmarshal(c.Arguments, &a); err != nil {
			return nil, err
		}
		mu.Lock()
		got = append(got, a.Text)
		mu.Unlock()
		return &mcptest.Result{Content: mcptest.Text("ok"), StructuredContent: map[string]int{"n": len(a.Text)}}, nil
	}}
	srv := mcptest.Start(t, mcptest.Options{}, bigTool(), echo)
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "echo", Nth: 1, Status: http.StatusBadRequest})
	db := openDB(t)
	wf := mustParse(t, testkit.Workflow{URL: srv.URL, Tasks: []testkit.Task{
		{ID: "a", Idempotency: "idempotent", Tool: "big"},
		{ID: "b", Idempotency: "idempotent", Tool: "echo", Arguments: "{text: '${{ tasks.a.output.text }}'}"},
	}, Outputs: []testkit.Output{{Name: "text", Value: "${{ tasks.a.output.text }}"}, {Name: "n", Value: "${{ tasks.b.output.n }}"}}}.YAML())
	ctx := context.Background()
	r := &workflow.Runner{DB: db}
	res, err := r.Run(ctx, wf, nil, workflow.RunOptions{})
	if err != nil || res.State != workflow.StateFailed {
		t.Fatalf("run %s (%v, %v), want failed at b", res.State, err, res.Err)
	}
	fin := typesOf(t, db, res.RunID, vocab.TypeTaskFinished)
	if len(fin) == 0 || strings.Contains(fin[0].Payload, "0123456789") || !strings.Contains(fin[0].Payload, `"outputOfCall":true`) {
		t.Fatalf("a's task.finished is not written without its output (outputOfCall)")
	}
	res, err = r.ResumeWith(ctx, res.RunID, workflow.ResumeOptions{RetryFailed: true})
	if err != nil || res.Err != nil {
		t.Fatalf("resume: %v %v", err, res.Err)
	}
	if srv.Stats().Calls["big"] != 1 || len(got) != 1 || got[0] != bigOutput {
		t.Fatalf("big called %d times, echo executed with %d texts; want 1 and a's output", srv.Stats().Calls["big"], len(got))
	}
	if res.Outputs["text"] != bigOutput || res.Outputs["n"] != json.Number("4096") {
		t.Fatalf("resumed outputs n=%v, text of %d bytes; want 4096 and a's output", res.Outputs["n"], len(res.Outputs["text"].(string)))
	}
}
