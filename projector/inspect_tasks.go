package projector

import (
	"errors"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// CallTaskView is what inspect shows of a call made as an MCP task: the
// task id (its digest when the server's id is long or odd), the session's
// digest (never the id itself), the status history with the polls each
// status stood for, and how the cancel went.
type CallTaskView struct {
	TaskID          string           `json:"taskId"`
	TaskIDDigest    string           `json:"taskIdDigest"`
	SessionIDDigest string           `json:"sessionIdDigest,omitempty"`
	History         []TaskStatusView `json:"history"`
	Polls           int              `json:"polls"`
	// Folded counts the status changes seen but not recorded, beyond the
	// call's bound on status records.
	Folded int                   `json:"folded,omitempty"`
	Cancel *vocab.CallTaskCancel `json:"cancel,omitempty"`
}

// TaskStatusView is one recorded status; Polls is how many identical
// tasks/get answers it stands for (0 for the CreateTaskResult's own), and
// Folded how many changes before it were not recorded (the call's bound).
type TaskStatusView struct {
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	Poll          int    `json:"poll"`
	Polls         int    `json:"polls"`
	Folded        int    `json:"folded,omitempty"`
}

// maxShownTaskID bounds the task ids inspect shows as they are.
const maxShownTaskID = 64

// taskViews collects the task events of a run, per effect id.
type taskViews map[string]*CallTaskView

// add folds one event into the views; events of other types are ignored.
// A payload sealed for a key this process lacks leaves the view out:
// inspect works without the key, like for frames recorded in clear.
func (tv taskViews) add(e events.Event) error {
	err := tv.fold(e)
	if errors.Is(err, events.ErrKeyRequired) {
		return nil
	}
	return err
}

func (tv taskViews) fold(e events.Event) error {
	switch e.Type {
	case vocab.TypeCallTaskAccepted:
		p, err := vocab.Decode[vocab.CallTaskAccepted](e)
		if err != nil {
			return err
		}
		v := &CallTaskView{TaskID: p.TaskIDDigest, TaskIDDigest: p.TaskIDDigest, SessionIDDigest: p.SessionIDDigest,
			History: []TaskStatusView{{Status: p.Status, StatusMessage: p.StatusMessage}}}
		if len(p.TaskID) <= maxShownTaskID && plainID(p.TaskID) {
			v.TaskID = p.TaskID
		}
		tv[p.EffectID] = v // a redispatch made a new task: show the last
	case vocab.TypeCallTaskStatus:
		p, err := vocab.Decode[vocab.CallTaskStatus](e)
		if err != nil {
			return err
		}
		if v := tv[p.EffectID]; v != nil {
			v.History = append(v.History, TaskStatusView{Status: p.Status, StatusMessage: p.StatusMessage, Poll: p.Poll, Folded: p.Folded})
			v.Polls = max(v.Polls, p.Poll)
			v.Folded += p.Folded
		}
	case vocab.TypeCallTaskCancel:
		p, err := vocab.Decode[vocab.CallTaskCancel](e)
		if err != nil {
			return err
		}
		if v := tv[p.EffectID]; v != nil {
			p.Move = nil // the call's transition, not the cancel's outcome
			v.Cancel = &p
		}
	case vocab.TypeCallResult:
		if tv[strings.TrimPrefix(e.Stream, "call/")] == nil {
			return nil // not a task's result: nothing to decode
		}
		p, err := vocab.Decode[vocab.CallResult](e)
		if err != nil {
			return err
		}
		if v := tv[p.EffectID]; v != nil {
			v.Polls = max(v.Polls, p.Polls)
		}
	}
	return nil
}

// finish counts the polls each status stood for: the created status the
// polls before the first change, each other one the polls from its own to
// the next change (the last one, to the last poll).
func (tv taskViews) finish() {
	for _, v := range tv {
		for i := range v.History {
			from := max(v.History[i].Poll, 1)
			to := v.Polls + 1
			if i+1 < len(v.History) {
				to = v.History[i+1].Poll
			}
			v.History[i].Polls = max(to-from, 0)
		}
	}
}

func plainID(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r == ':' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return s != ""
}
