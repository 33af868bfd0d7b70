package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
)

// Replay of MCP tasks: the session side. A replay session is a
// [TaskSession] whose every answer comes from the recorded steps of the
// task (task_index.go), in order, with no socket and no wait: the
// recorded pollInterval is not slept.
//
// Polls are reproduced, not decoupled from the count: a status change the
// source recorded at poll k, after its previous change at poll j, is
// answered as k-j-1 polls that find the status unchanged (folded again,
// so they record nothing) and then the change. The replay's call thus
// counts the same polls and records the same call.task_status events,
// poll ordinals included; each answered step's frames are referenced
// (replay.frames), never copied. A replay asking for a step the source
// did not record, or of another kind, is a divergence naming the call.

var _ workflow.TaskSession = (*replaySession)(nil)

// ToolCallTasks is what the recorded initialize result advertised.
func (s *replaySession) ToolCallTasks() bool { return s.rec.toolCallTasks }

// ToolsChanged reports whether the source re-listed this session's tools
// (after notifications/tools/list_changed) before the call the run loop
// prepares now: its next recorded relist belongs to that call's task.
func (s *replaySession) ToolsChanged() bool {
	next := max(s.lists-1, 0)
	return s.lists > 0 && next < len(s.rec.relists) && s.rec.relists[next].catalog.TaskID == s.src.curKey.task
}

// SessionID is "": the recorded session id is a bearer credential, and a
// replay is never resumed, so it is not copied into the replay's log.
func (s *replaySession) SessionID() string { return "" }

// CallToolTask checks the call like CallTool and answers with the recorded
// CreateTaskResult, the direct result (the server ignored params.task) or
// the recorded failure.
func (s *replaySession) CallToolTask(ctx context.Context, req transport.CallRequest, _ time.Duration, sink transport.Sink) (*transport.TaskCall, error) {
	send, err := s.nextSend(ctx, req, sink)
	if err != nil {
		return nil, err
	}
	switch {
	case send.task != nil:
		a := send.task.accepted
		s.src.tasks[s.remote+"\x00"+a.TaskID] = send.task
		return &transport.TaskCall{ID: a.JSONRPCID, Task: &transport.Task{ID: a.TaskID, RedactedID: a.TaskID, Status: transport.TaskStatus(a.Status),
			StatusMessage: a.StatusMessage, TTL: time.Duration(a.TTLMs) * time.Millisecond,
			PollInterval: time.Duration(a.PollIntervalMs) * time.Millisecond}}, nil
	case send.result != nil:
		res, err := send.callResult()
		if err != nil {
			return nil, err
		}
		return &transport.TaskCall{Result: res, ID: res.ID}, nil
	case send.callErr != nil:
		return nil, send.failure()
	}
	return nil, s.div("dispatch", "a send without a recorded outcome", "its outcome")
}

// div is a divergence at the call the run loop expects.
func (s *replaySession) div(field, recorded, replayed string) error {
	src := s.src
	return &workflow.DivergenceError{SourceRunID: src.runID, TaskID: src.curKey.task, Attempt: src.curKey.attempt, Field: field, Recorded: recorded, Replayed: replayed}
}

// step returns the next recorded step of task taskID if it is a request of
// method; anything else is a divergence. The caller references its frames
// (refs).
func (s *replaySession) step(taskID, method string) (*recTask, *taskStep, error) {
	t := s.src.tasks[s.remote+"\x00"+taskID]
	if t == nil {
		return nil, nil, s.div("task", "no task "+transport.TaskIDDigest(taskID)+" on "+s.remote, method)
	}
	for t.next < len(t.steps) && t.steps[t.next].interrupted {
		t.next++
	}
	if t.next >= len(t.steps) {
		return nil, nil, s.div("task", fmt.Sprintf("%d request(s) about task %s", len(t.steps), t.accepted.TaskIDDigest),
			fmt.Sprintf("%s (request %d)", method, t.next+1))
	}
	st := t.steps[t.next]
	if st.method != method {
		return nil, nil, s.div("task", fmt.Sprintf("%s (request %d about task %s)", st.method, t.next+1, t.accepted.TaskIDDigest), method)
	}
	t.next++
	return t, st, nil
}

// answered takes the next step like step and references its frames.
func (s *replaySession) answered(ctx context.Context, taskID, method string, sink transport.Sink) (*taskStep, error) {
	_, st, err := s.step(taskID, method)
	if err != nil {
		return nil, err
	}
	return st, s.src.emitRefs(ctx, sink, st.refs)
}

// PollTask answers the recorded polls of the task until its status is no
// longer working (see the package comment above for the folded ones).
func (s *replaySession) PollTask(ctx context.Context, t *transport.Task, sink transport.Sink, observe func(*transport.Task) error) (*transport.Task, error) {
	for t.Status == transport.TaskWorking {
		rt, st, err := s.step(t.ID, "tasks/get")
		if err != nil {
			return t, err
		}
		if st.callErr != nil { // a failed poll's frames are not kept
			return t, st.failure("tasks/get")
		}
		next := &transport.Task{ID: t.ID, Status: t.Status, StatusMessage: t.StatusMessage, PollInterval: t.PollInterval, TTL: t.TTL}
		if p := st.status; p != nil {
			folded := p.Folded
			for rt.polls+1 < p.Poll { // the polls the source folded before this change
				rt.polls++
				if folded > 0 { // a change the source saw beyond its bounds: only counted
					next = foldedStatus(t, folded)
					folded--
				}
				if observe != nil {
					if err := observe(next); err != nil {
						return next, err
					}
				}
			}
			next = &transport.Task{ID: t.ID, Status: transport.TaskStatus(p.Status), StatusMessage: p.StatusMessage, PollInterval: t.PollInterval, TTL: t.TTL}
			if next.Status == transport.TaskInputRequired {
				next.Input = inputOf(st.responses) // 2026-07-28: answered with tasks/update
			}
		}
		// Referenced now, after the folded polls: the poll that recorded
		// them holds them until observe records it.
		if err := s.src.emitRefs(ctx, sink, st.refs); err != nil {
			return t, err
		}
		rt.polls++
		if observe != nil {
			if err := observe(next); err != nil {
				return next, err
			}
		}
		t = next
	}
	return t, nil
}

// foldedStatus stands for the n-th last change a source saw but did not
// record (beyond the call's bounds): a working status unlike the others
// and marked (workflow.FoldedRaw) so that it is counted as a change but never
// recorded, as in the source.
func foldedStatus(t *transport.Task, n int) *transport.Task {
	return &transport.Task{ID: t.ID, Status: transport.TaskWorking, StatusMessage: fmt.Sprintf("folded change %d", n),
		PollInterval: t.PollInterval, TTL: t.TTL, Raw: workflow.FoldedRaw}
}

// GetTask answers a tasks/get outside polling (after a refused
// tasks/cancel) from its recorded response.
func (s *replaySession) GetTask(ctx context.Context, taskID string, sink transport.Sink) (*transport.Task, error) {
	st, err := s.answered(ctx, taskID, "tasks/get", sink)
	if err != nil {
		return nil, err
	}
	if st.callErr != nil {
		return nil, st.failure("tasks/get")
	}
	if t := st.answer(); t != nil {
		return t, nil
	}
	return nil, &transport.Error{Op: "tasks/get", Kind: transport.KindTransportLoss, Sent: true, Message: "replay: no answer was recorded"}
}

// TaskResult answers with the recorded tasks/result.
func (s *replaySession) TaskResult(ctx context.Context, taskID string, sink transport.Sink) (*transport.CallResult, error) {
	st, err := s.answered(ctx, taskID, "tasks/result", sink)
	if err != nil {
		return nil, err
	}
	switch {
	case st.result != nil:
		return resultFrom(st.responses, st.result)
	case st.callErr != nil:
		return nil, st.failure("tasks/result")
	}
	// Only the best-effort path after a refused tasks/cancel leaves a
	// failed tasks/result without call.error; its outcome did not depend
	// on the failure's kind.
	return nil, &transport.Error{Op: "tasks/result", Kind: transport.KindTransportLoss, Sent: true, Message: "replay: no outcome was recorded"}
}

// CancelTask answers with the recorded tasks/cancel: the server's status,
// or its failure (a JSON-RPC error when the response frame holds one).
func (s *replaySession) CancelTask(ctx context.Context, taskID string, sink transport.Sink) (*transport.Task, error) {
	st, err := s.answered(ctx, taskID, "tasks/cancel", sink)
	if err != nil {
		return nil, err
	}
	rec := st.cancel
	if rec == nil {
		return nil, s.div("task", "tasks/cancel without a recorded outcome", "its outcome")
	}
	if rec.Error == "" {
		return &transport.Task{ID: taskID, Status: transport.TaskStatus(rec.Status)}, nil
	}
	te := &transport.Error{Op: "tasks/cancel", Kind: transport.KindTransportLoss, Sent: true}
	if code, ok := rpcErrorCode(st.responses); ok {
		te.Kind, te.Code = transport.KindRemoteError, code
	}
	return nil, &workflow.ReplayedError{Msg: rec.Error, Err: te}
}

// failure rebuilds a recorded failure of a request about a task (op) so
// that the call takes the branch it took in the source: the recorded
// kind, status and code, and for a poll ended by the user's cancel (or
// the task's deadline) a mark that pollTask reads as its context ending.
func (s *taskStep) failure(op string) error {
	ce := s.callErr
	te := &transport.Error{Op: op, Kind: transport.Kind(ce.Kind), Status: ce.Status, Code: ce.Code, Sent: true}
	return &workflow.ReplayedError{Msg: ce.Message, Err: te, CtxEnded: fsm.Trigger(s.trigger) == fsm.Cancel, CancelCause: s.cancelCause}
}

// rpcErrorCode is the code of the JSON-RPC error in a recorded response.
func rpcErrorCode(responses []vocab.Frame) (int, bool) {
	for i := len(responses) - 1; i >= 0; i-- {
		var m struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		if json.Unmarshal(responses[i].Body, &m) == nil && m.Error != nil {
			return m.Error.Code, true
		}
	}
	return 0, false
}
