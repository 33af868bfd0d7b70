package vocab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/canonjson"
)

// A tool's output is stored once: in the response frame that carried it.
// A call.result whose output is exactly what that frame's result holds
// leaves it out (OutputInResponse), and a task.finished whose output is
// its call's leaves it out too (OutputOfCall). Outputs puts them back for
// a reader folding a run in log order; FrameOutput is the one rule that
// says what a response frame holds, used by the writer (which leaves an
// output out only when FrameOutput gives it back byte for byte) and by
// Outputs. Logs written before carry every output and read as written.

// ErrOutputMissing reports a call.result or task.finished that left its
// output out where the log does not hold it (a corrupt log).
var ErrOutputMissing = errors.New("vocab: output left out but not in the log")

// FrameOutput returns the output of a tools/call result that response
// frame f holds: its structuredContent when structured, else its content,
// as recorded. f must be an incoming response with JSON-RPC id id whose
// result's sha256 is digest (call.result's resultDigest).
func FrameOutput(f Frame, id json.RawMessage, digest string, structured bool) (json.RawMessage, error) {
	if f.Dir != "in" || f.Kind != "response" {
		return nil, fmt.Errorf("frame %s %s is not a response", f.Dir, f.Kind)
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(f.Body, &m); err != nil {
		return nil, fmt.Errorf("response frame body: %w", err)
	}
	if !bytes.Equal(m.ID, id) {
		return nil, fmt.Errorf("response frame has id %s, the result %s", m.ID, id)
	}
	if got := canonjson.DigestBytes(m.Result); got != digest {
		return nil, fmt.Errorf("response frame's result has digest %s, the call.result %s", got, digest)
	}
	var r struct {
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal(m.Result, &r); err != nil {
		return nil, fmt.Errorf("response frame's result: %w", err)
	}
	out := r.Content
	if structured {
		out = r.StructuredContent
	}
	if len(out) == 0 || bytes.Equal(out, []byte("null")) {
		return nil, fmt.Errorf("response frame's result has no output (structured %t)", structured)
	}
	return out, nil
}

// Outputs restores the outputs a run's log leaves out (see FrameOutput),
// fed the run's events in log order: every response frame (Frame), every
// call.prepared (Prepared), then each call.result and task.finished as
// decoded (Result, Finished), which it completes in place. The zero value
// is ready to use.
type Outputs struct {
	responses map[string]events.Event    // effect id → the call's last response frame
	attempts  map[string]string          // effect id → its task attempt ("task/attempt")
	outputs   map[string]json.RawMessage // task attempt → output of its call's last call.result
}

// Frame notes e if it is a response a call received (not one it sent,
// answering a server's request).
func (o *Outputs) Frame(e events.Event) {
	id, ok := strings.CutPrefix(e.Stream, callStream)
	if !ok || e.Type != FramePrefix+"response" {
		return
	}
	if h, err := DecodeFrameHeader(e); err != nil || h.Dir != "in" {
		return // an unreadable frame is reported by the reader that needs it
	}
	if o.responses == nil {
		o.responses = map[string]events.Event{}
	}
	o.responses[id] = e
}

// Prepared notes which task attempt a call belongs to.
func (o *Outputs) Prepared(p CallPrepared) {
	if o.attempts == nil {
		o.attempts = map[string]string{}
	}
	o.attempts[p.EffectID] = attemptKey(p.TaskID, p.Attempt)
}

// Result sets p.Output from the call's last response frame when p left it
// out, and notes the output for the call's task attempt; e is p's event.
func (o *Outputs) Result(e events.Event, p *CallResult) error {
	if p.OutputInResponse && len(p.Output) == 0 {
		fe, ok := o.responses[p.EffectID]
		if !ok {
			return fmt.Errorf("%w: call.result at seq %d: call %s has no response frame", ErrOutputMissing, e.Seq, p.EffectID)
		}
		f, err := DecodeFrame(fe)
		if err != nil {
			return err
		}
		out, err := FrameOutput(f, p.JSONRPCID, p.ResultDigest, p.Structured)
		if err != nil {
			return fmt.Errorf("%w: call.result at seq %d, response frame at seq %d: %w", ErrOutputMissing, e.Seq, fe.Seq, err)
		}
		p.Output = out
	}
	if k, ok := o.attempts[p.EffectID]; ok {
		if o.outputs == nil {
			o.outputs = map[string]json.RawMessage{}
		}
		o.outputs[k] = p.Output
	}
	return nil
}

// Finished sets p.Output to the output of the attempt's call when p left
// it out; e is p's event.
func (o *Outputs) Finished(e events.Event, p *TaskFinished) error {
	if !p.OutputOfCall || len(p.Output) > 0 {
		return nil
	}
	out := o.outputs[attemptKey(p.TaskID, p.Attempt)]
	if len(out) == 0 {
		return fmt.Errorf("%w: task.finished at seq %d: task %s attempt %d has no call output", ErrOutputMissing, e.Seq, p.TaskID, p.Attempt)
	}
	p.Output = out
	return nil
}

func attemptKey(task string, attempt int) string { return task + "/" + strconv.Itoa(attempt) }
