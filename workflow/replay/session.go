package replay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/internal/canonjson"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
)

// failure rebuilds a recorded call failure so that the run loop fires the
// same trigger it fired in the source run.
func (s *recSend) failure() error {
	ce := s.callErr
	te := &transport.Error{Op: "tools/call", Kind: transport.Kind(ce.Kind), Status: ce.Status, Code: ce.Code}
	switch fsm.Trigger(s.trigger) {
	case fsm.FailAmbiguous:
		te.Sent = true
	case fsm.FailPossiblyExecuted:
		te.Sent = true
		// Unauthorized is possibly executed only after the server accepted the call (a 401 on the resume GET).
		te.Accepted = te.Kind == transport.KindUnauthorized
		if !te.MayHaveExecuted() { // the source error was not a transport error
			return &workflow.ReplayedError{Msg: ce.Message, Err: errors.New(ce.Message)}
		}
	case fsm.Cancel:
		// The source's context ended after the send: the user's cancel
		// (recorded kind cancelled) or a deadline. The replay fires the
		// same Cancel, and ends as the source did (exit 130 for the user's).
		cause := "timeout"
		if te.Kind == transport.KindCancelled {
			cause = "user"
		}
		te.Kind, te.Sent = transport.KindCancelled, true
		return &workflow.ReplayedError{Msg: ce.Message, Err: te, CtxEnded: true, CancelCause: cause}
	case fsm.URLElicitationRequired:
		// The recorded message is the call's, which names the hosts in
		// front of the server's error: give back the server's error (its
		// data from the response frame) so the call says it once again.
		te.Data = errorData(s.responses)
		if why, ok := workflow.URLElicitationReason(te); ok {
			msg, _ := strings.CutPrefix(ce.Message, fmt.Sprintf("%s: %s: ", fsm.ReasonURLElicitationRequired, why))
			return &workflow.ReplayedError{Msg: msg, Err: te}
		}
	}
	return &workflow.ReplayedError{Msg: ce.Message, Err: te}
}

// errorData is the data member of the last JSON-RPC error response.
func errorData(responses []vocab.Frame) json.RawMessage {
	for i := len(responses) - 1; i >= 0; i-- {
		var m struct {
			Error *struct {
				Data json.RawMessage `json:"data"`
			} `json:"error"`
		}
		if json.Unmarshal(responses[i].Body, &m) == nil && m.Error != nil {
			return m.Error.Data
		}
	}
	return nil
}

// sessionFailure rebuilds a recorded failure to open a session (op
// "initialize") or list its tools (op "tools/list") with the kind, status
// and code the log recorded, so that the run loop classifies it as it did.
func (src *replaySource) sessionFailure(op string, f *sessionFail) error {
	var rf sessionFail
	if f != nil {
		rf = *f
	}
	if rf.kind == "" {
		rf.kind = workflow.KindForExit(src.exitCode)
	}
	if rf.msg == "" {
		rf.msg = "recorded " + op + " failure"
	}
	return &workflow.ReplayedError{Msg: rf.msg, Err: &transport.Error{Op: op, Kind: rf.kind, Status: rf.status, Code: rf.code}}
}

type replayConn struct {
	src    *replaySource
	remote string
}

// emitRefs hands sink the reference to a group of recorded frames.
func (src *replaySource) emitRefs(ctx context.Context, sink transport.Sink, r frameRefs) error {
	if r.count == 0 {
		return nil
	}
	if r.lastHash == "" {
		h, err := src.db.HashAt(ctx, r.run, r.spans[len(r.spans)-1][1])
		if err != nil {
			return fmt.Errorf("replay %s: %w", src.runID, err)
		}
		r.lastHash = h
	}
	body, err := json.Marshal(vocab.ReplayFrames{SourceRunID: r.run, Spans: r.spans, Count: r.count, LastHash: r.lastHash})
	if err != nil {
		return err
	}
	return sink(ctx, transport.Frame{Dir: "ref", Kind: workflow.ReplayedKind, Body: body})
}

// Connect opens the next recorded generation of this remote.
func (c *replayConn) Connect(ctx context.Context, sink transport.Sink) (workflow.Session, error) {
	src := c.src
	src.gens[c.remote]++
	for g := src.gens[c.remote]; g <= len(src.sessions[c.remote]) && src.sessions[c.remote][g-1].abandoned; g++ {
		src.gens[c.remote]++ // a session the source's process ended while opening
	}
	gen := src.gens[c.remote]
	if gen > len(src.sessions[c.remote]) {
		return nil, &workflow.DivergenceError{SourceRunID: src.runID, TaskID: src.curKey.task, Attempt: src.curKey.attempt, Field: "session",
			Recorded: fmt.Sprintf("%d session(s) with %q", len(src.sessions[c.remote]), c.remote), Replayed: fmt.Sprintf("session %d", gen)}
	}
	rs := src.sessions[c.remote][gen-1]
	if err := src.emitRefs(ctx, sink, rs.connect); err != nil {
		return nil, err
	}
	if rs.opened == nil {
		return nil, src.sessionFailure("initialize", rs.failure)
	}
	return &replaySession{src: src, remote: c.remote, rec: rs}, nil
}

type replaySession struct {
	src    *replaySource
	remote string
	rec    *recSession
	lists  int // ListTools answered so far
}

var _ workflow.Recorded = (*replaySession)(nil)

func (s *replaySession) Info() workflow.SessionInfo {
	return workflow.SessionInfo{ProtocolVersion: s.rec.opened.ProtocolVersion, ServerInfo: s.rec.opened.ServerInfo, IDDigest: s.rec.opened.SessionIDDigest}
}

func (s *replaySession) ListTools(ctx context.Context, sink transport.Sink) (*transport.Catalog, error) {
	s.lists++
	if s.lists > 1 { // after notifications/tools/list_changed
		if s.lists-2 >= len(s.rec.relists) {
			return nil, s.div("session", fmt.Sprintf("%d tools/list on this session", len(s.rec.relists)+1), fmt.Sprintf("tools/list %d", s.lists))
		}
		r := s.rec.relists[s.lists-2]
		if err := s.src.emitRefs(ctx, sink, r.refs); err != nil {
			return nil, err
		}
		return catalogOf(r.catalog), nil
	}
	if err := s.src.emitRefs(ctx, sink, s.rec.list); err != nil {
		return nil, err
	}
	if s.rec.catalog == nil {
		return nil, s.src.sessionFailure("tools/list", s.rec.failure)
	}
	return catalogOf(s.rec.catalog), nil
}

// catalogOf rebuilds a recorded catalog.
func catalogOf(rec *vocab.SessionCatalog) *transport.Catalog {
	cat := &transport.Catalog{Warnings: rec.Warnings}
	for _, t := range rec.Tools {
		// The recorded digest (on the schemas as received) is the source's,
		// whatever redaction did to the recorded schemas.
		cat.Tools = append(cat.Tools, transport.Tool{Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Execution: t.Execution}.WithDigest(t.Digest))
	}
	return cat
}

// CallTool checks the call against the recorded one (server, tool,
// arguments digest), replays the next recorded send's frames and returns
// its recorded outcome.
func (s *replaySession) CallTool(ctx context.Context, req transport.CallRequest, sink transport.Sink) (*transport.CallResult, error) {
	send, err := s.nextSend(ctx, req, sink)
	if err != nil {
		return nil, err
	}
	switch {
	case send.task != nil: // 2026-07-28: the server made the call a task (task2026.go)
		return s.createdTask(send), nil
	case send.result != nil:
		return send.callResult()
	case send.callErr != nil:
		return nil, send.failure()
	case send.inputRequired:
		return send.inputRequiredResult()
	}
	return nil, s.div("dispatch", "a send without a recorded outcome", "its outcome")
}

// nextSend checks req against the recorded call (server, tool, arguments
// digest), takes its next recorded send and references the send's frames.
func (s *replaySession) nextSend(ctx context.Context, req transport.CallRequest, sink transport.Sink) (*recSend, error) {
	src, div := s.src, s.div
	c := src.current
	if c == nil {
		return nil, div("call", "no call at this position", fmt.Sprintf("%s/%s", s.remote, req.Tool))
	}
	p := c.prepared
	argDigest := canonjson.DigestBytes(req.Arguments)
	switch {
	case p.Server != s.remote:
		return nil, div("server", p.Server, s.remote)
	case p.Tool != req.Tool:
		return nil, div("tool", p.Tool, req.Tool)
	case p.ArgumentsDigest != argDigest:
		return nil, div("argumentsDigest", p.ArgumentsDigest, argDigest)
	case c.next >= len(c.sends):
		return nil, div("dispatch", fmt.Sprintf("%d send(s)", len(c.sends)), fmt.Sprintf("send %d", c.next+1))
	}
	send := c.sends[c.next]
	c.next++
	if err := src.emitRefs(ctx, sink, send.refs); err != nil {
		return nil, err
	}
	return send, nil
}

// inputRequiredResult rebuilds an input-required result from the last
// recorded response frame: the run loop answers it again, by the same
// policy, and the next recorded send must carry the same arguments.
func (s *recSend) inputRequiredResult() (*transport.CallResult, error) {
	for i := len(s.responses) - 1; i >= 0; i-- {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if f := s.responses[i]; f.Dir != "in" || f.Kind != "response" || json.Unmarshal(f.Body, &m) != nil || len(m.Result) == 0 {
			continue
		}
		ir, err := transport.ParseInputRequired(m.Result)
		if err != nil {
			return nil, fmt.Errorf("replay: recorded input-required result: %w", err)
		}
		return &transport.CallResult{Raw: m.Result, ID: m.ID, InputRequired: ir}, nil
	}
	return nil, errors.New("replay: an input-required send without its response frame")
}

// callResult rebuilds the transport result from the recorded response frame.
func (s *recSend) callResult() (*transport.CallResult, error) {
	return resultFrom(s.responses, s.result)
}

// resultFrom rebuilds a tools/call (or tasks/result) result from the last
// recorded response frame that carries one; rec is its call.result.
func resultFrom(responses []vocab.Frame, rec *vocab.CallResult) (*transport.CallResult, error) {
	for i := len(responses) - 1; i >= 0; i-- {
		f := responses[i]
		if f.Dir != "in" || f.Kind != "response" {
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Result json.RawMessage `json:"result"`
		}
		if err := json.Unmarshal(f.Body, &m); err != nil || len(m.Result) == 0 {
			continue
		}
		var r struct {
			IsError           bool            `json:"isError"`
			Content           json.RawMessage `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		}
		if err := json.Unmarshal(m.Result, &r); err != nil {
			return nil, fmt.Errorf("replay: recorded result of %s: %w", rec.EffectID, err)
		}
		if bytes.Equal(r.StructuredContent, []byte("null")) {
			r.StructuredContent = nil
		}
		id := rec.JSONRPCID
		if len(id) == 0 {
			id = m.ID
		}
		res := &transport.CallResult{Raw: m.Result, IsError: r.IsError, Content: r.Content, StructuredContent: r.StructuredContent, ID: id}
		if v := rec.Received; v != nil { // the source's verdict on the value as received
			res.Received = &transport.OutputCheck{Kind: transport.Kind(v.Kind), Message: v.Message}
		}
		return res, nil
	}
	return nil, fmt.Errorf("replay: call %s has a recorded result but no response frame", rec.EffectID)
}

func (s *replaySession) Close(context.Context) error { return nil }

// SourceRunID is the run whose evidence answers.
func (s *replaySession) SourceRunID() string { return s.src.runID }

// SourceTaskID is the source task that opened this session.
func (s *replaySession) SourceTaskID() string { return s.rec.opened.TaskID }

// Expect makes (taskID, attempt, ordinal) the call the next CallTool must
// match and returns the effect id of the recorded call there ("" if the
// source made none: CallTool will then report the divergence).
func (s *replaySession) Expect(taskID string, attempt, ordinal int) string {
	c := s.src.expect(callKey{taskID, attempt, ordinal})
	if c == nil {
		return ""
	}
	return c.prepared.EffectID
}
