package replay

import (
	"encoding/json"
	"fmt"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
)

// Replay of MCP tasks: the index side. A send whose tools/call was
// answered with a CreateTaskResult (call.task_accepted) carries the task's
// recorded steps in log order: one per tasks/get, tasks/result or
// tasks/cancel request whose frames reached the log, plus one per failed
// poll (its frames are not kept, its call.error is). A replay answers the
// task's requests from these steps, in order, and reproduces the folded
// polls between two recorded status changes from the change's poll
// ordinal (see task.go).

// recTask is the recorded MCP task of one send.
type recTask struct {
	accepted vocab.CallTaskAccepted
	steps    []*taskStep
	// next is the first step a replay has not answered yet; polls counts
	// the tasks/get it has answered, folded ones included.
	next, polls int
	// pendingErr is a call.error waiting for the transition that follows.
	pendingErr *vocab.CallError
	// early are frames of the task recorded before any request about it
	// (a stdio server's notifications/tasks/status that arrived between
	// two exchanges is recorded ahead of the next request): they ride
	// with the first step.
	early frameRefs
}

// taskStep is one recorded request about a task and what came of it.
type taskStep struct {
	method    string // tasks/get, tasks/result or tasks/cancel
	refs      frameRefs
	responses []vocab.Frame
	// status is the change this poll recorded (nil: the poll found the
	// status unchanged, or it was not a poll).
	status  *vocab.CallTaskStatus
	result  *vocab.CallResult
	callErr *vocab.CallError
	trigger string // the transition fired on callErr
	// cancelCause: a poll ended by the source's cancel or deadline
	// (trigger cancel), the cause of the tasks/cancel that followed.
	cancelCause string
	cancel      *vocab.CallTaskCancel
	// interrupted: the process ended before its outcome was committed
	// (run.resumed followed). Resume asked again; a replay, which is not
	// interrupted, skips it and answers from the request that followed.
	interrupted bool
}

// settled reports whether the step has its outcome.
func (s *taskStep) settled() bool { return s.result != nil || s.callErr != nil || s.cancel != nil }

// taskOf is the recorded task of call effectID's latest send, nil when
// that send was not accepted as a task.
func (src *replaySource) taskOf(effectID string) *recTask {
	if s := src.lastSend(effectID); s != nil {
		return s.task
	}
	return nil
}

// last is the task's latest step, nil before the first.
func (t *recTask) last() *taskStep {
	if len(t.steps) == 0 {
		return nil
	}
	return t.steps[len(t.steps)-1]
}

// stepFor returns the step a frame of method belongs to: a request out
// opens a new one, anything else continues the latest.
func (t *recTask) stepFor(f vocab.Frame) (*taskStep, error) {
	if f.Dir == "out" && f.Kind == "request" {
		s := &taskStep{method: f.Method, refs: t.early}
		t.early = frameRefs{}
		t.steps = append(t.steps, s)
		return s, nil
	}
	if s := t.last(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("frame %s %s of task %s before any request about it", f.Kind, f.Method, t.accepted.TaskIDDigest)
}

// taskFrame files a frame of an accepted task under its step.
func (ix *indexer) taskFrame(t *recTask, e events.Event, h vocab.Frame) error {
	if t.last() == nil && h.Dir != "out" && h.Kind == "notification" {
		return t.early.add(ix.src.runID, e.Seq)
	}
	s, err := t.stepFor(h)
	if err != nil {
		return err
	}
	if h.Dir == "in" && h.Kind == "response" {
		f, err := vocab.DecodeFrame(e)
		if err != nil {
			return err
		}
		s.responses = append(s.responses, f)
	}
	return s.refs.add(ix.src.runID, e.Seq)
}

// taskRefs files a replay's reference to one step's frames (a replay
// references each step's frames as one group): the step is the one whose
// request the group holds.
func (ix *indexer) taskRefs(t *recTask, r vocab.ReplayFrames) error {
	var s *taskStep
	for _, sp := range r.Spans {
		err := ix.src.db.ScanRange(ix.ctx, r.SourceRunID, sp[0], sp[1], func(fe events.Event) error {
			h, err := vocab.DecodeFrameHeader(fe)
			if err != nil {
				return err
			}
			if s == nil && t.last() == nil && h.Dir != "out" && h.Kind == "notification" {
				return nil // recorded before the first request: the group rides with it
			}
			if s == nil || (h.Dir == "out" && h.Kind == "request") {
				if s, err = t.stepFor(h); err != nil {
					return err
				}
			}
			if h.Dir == "in" && h.Kind == "response" {
				f, err := vocab.DecodeFrame(fe)
				if err != nil {
					return err
				}
				s.responses = append(s.responses, f)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if s == nil {
		return nil
	}
	return s.refs.addSpans(r.SourceRunID, r.Spans, r.Count, r.LastHash)
}

func (ix *indexer) callTaskAccepted(e events.Event) error {
	p, err := vocab.Decode[vocab.CallTaskAccepted](e)
	if err != nil {
		return err
	}
	s := ix.src.lastSend(p.EffectID)
	if s == nil {
		return fmt.Errorf("task accepted for call %s, which has no send", p.EffectID)
	}
	p.SessionID = "" // a bearer credential: a replay never needs it
	s.task = &recTask{accepted: p}
	return nil
}

func (ix *indexer) callTaskStatus(e events.Event) error {
	p, err := vocab.Decode[vocab.CallTaskStatus](e)
	if err != nil {
		return err
	}
	t := ix.src.taskOf(p.EffectID)
	if t == nil {
		return fmt.Errorf("task status of call %s, which has no accepted task", p.EffectID)
	}
	s := t.last()
	if s == nil || s.method != "tasks/get" || s.status != nil || s.settled() {
		// A status change is recorded with the frames of the poll that
		// saw it; a log without them answers from the event alone.
		s = &taskStep{method: "tasks/get"}
		t.steps = append(t.steps, s)
	}
	s.status = &p
	return nil
}

func (ix *indexer) callTaskCancel(e events.Event) error {
	p, err := vocab.Decode[vocab.CallTaskCancel](e)
	if err != nil {
		return err
	}
	t := ix.src.taskOf(p.EffectID)
	if t == nil {
		return fmt.Errorf("task cancel of call %s, which has no accepted task", p.EffectID)
	}
	at := t.cancelStep()
	s := t.last()
	if at >= 0 {
		s = t.steps[at]
	} else if s == nil || s.method != "tasks/cancel" || s.settled() {
		s = &taskStep{method: "tasks/cancel"} // failed before a frame was sent
		t.steps = append(t.steps, s)
	}
	if at < 0 {
		at = len(t.steps) - 1
	}
	s.cancel = &p
	for i := at - 1; i >= 0; i-- { // the poll whose end asked for it
		if prev := t.steps[i]; prev.callErr != nil && fsm.Trigger(prev.trigger) == fsm.Cancel {
			prev.cancelCause = p.Cause
			break
		} else if !prev.interrupted {
			break
		}
	}
	return nil
}

// taskResult files call.result under the tasks/result that produced it.
func (t *recTask) taskResult(p *vocab.CallResult) {
	if s := t.last(); s != nil && !s.settled() && (s.method == "tasks/result" || (s.method == "tasks/get" && s.status != nil)) {
		s.result = p // tasks/result's, or (2026-07-28) the tasks/get's that carried it inline
	}
}

// taskError holds call.error until the transition that follows it says
// whose it is (taskTransition).
func (t *recTask) taskError(p *vocab.CallError) { t.pendingErr = p }

// taskTransition files the call.error just before a transition: the
// outcome of an unsettled tasks/result, else, when trigger is one that a
// failed tasks/get fires, a poll whose frames were not kept. Any other
// error (a result that failed validation, a task the server cancelled)
// is the call's outcome, which the replay reproduces by itself.
func (t *recTask) taskTransition(trigger string) {
	ce := t.pendingErr
	t.pendingErr = nil
	if ce == nil {
		return
	}
	if s := t.last(); s != nil && s.method == "tasks/result" && !s.settled() {
		s.callErr, s.trigger = ce, trigger
		return
	}
	switch fsm.Trigger(trigger) {
	case fsm.FailAmbiguous, fsm.FailPossiblyExecuted, fsm.TaskLost, fsm.Cancel:
		t.steps = append(t.steps, &taskStep{method: "tasks/get", callErr: ce, trigger: trigger})
	}
}

// answer rebuilds the task a tasks/get or tasks/cancel response frame
// carries (nil when the step holds none).
func (s *taskStep) answer() *transport.Task {
	for i := len(s.responses) - 1; i >= 0; i-- {
		var m struct {
			Result *struct {
				TaskID        string               `json:"taskId"`
				Status        transport.TaskStatus `json:"status"`
				StatusMessage string               `json:"statusMessage"`
			} `json:"result"`
		}
		if json.Unmarshal(s.responses[i].Body, &m) == nil && m.Result != nil && m.Result.Status != "" {
			return &transport.Task{ID: m.Result.TaskID, Status: m.Result.Status, StatusMessage: m.Result.StatusMessage}
		}
	}
	return nil
}

// initializeResult reads, from the response frame (initialize) of a session
// not yet opened, whether the server advertised task-augmented tools/call.
func (ix *indexer) initializeResult(h vocab.Frame, e events.Event) error {
	s := ix.src.session(h.Remote, h.Generation)
	if s.opened != nil || h.Dir != "in" || h.Kind != "response" {
		return nil
	}
	f, err := vocab.DecodeFrame(e)
	if err != nil {
		return err
	}
	var m struct {
		Result struct {
			Capabilities struct {
				Tasks struct {
					Requests struct {
						Tools struct {
							Call json.RawMessage `json:"call"`
						} `json:"tools"`
					} `json:"requests"`
				} `json:"tasks"`
			} `json:"capabilities"`
		} `json:"result"`
	}
	if json.Unmarshal(f.Body, &m) == nil {
		c := m.Result.Capabilities.Tasks.Requests.Tools.Call
		s.toolCallTasks = len(c) > 0 && c[0] == '{'
	}
	return nil
}

// runResumed marks what the ended process left without an outcome: the
// sessions it was opening, every call's last send, or the last request
// about its task.
func (ix *indexer) runResumed(events.Event) error {
	for _, s := range ix.unsettled {
		switch {
		case s.failure != nil:
		case s.opened == nil: // resume opens this generation again
			s.connect, s.toolCallTasks = frameRefs{}, false
		default: // resume opened the next generation
			s.abandoned = true
		}
	}
	ix.unsettled = nil
	for _, c := range ix.src.calls {
		if len(c.sends) == 0 {
			continue
		}
		s := c.sends[len(c.sends)-1]
		switch {
		case s.task != nil:
			if st := s.task.last(); st != nil && !st.settled() && (st.method != "tasks/get" || (st.status == nil && len(st.responses) == 0)) {
				st.interrupted = true // a tasks/result or tasks/cancel, or a tasks/get with no answer
			}
		case s.result == nil && s.callErr == nil:
			s.interrupted = true
		}
	}
	return nil
}

// cancelStep is the index of the unsettled tasks/cancel that plain
// tasks/get steps follow (2026-07-28: tasks/cancel is only acknowledged,
// and tasks/get then asks for the final state), -1 when there is none.
func (t *recTask) cancelStep() int {
	for i := len(t.steps) - 1; i >= 0; i-- {
		switch st := t.steps[i]; {
		case st.method == "tasks/cancel" && !st.settled() && i < len(t.steps)-1:
			return i
		case st.method != "tasks/get" || st.status != nil || st.settled():
			return -1
		}
	}
	return -1
}
