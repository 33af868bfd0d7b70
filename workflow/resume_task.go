package workflow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
)

// loggedTask is the MCP task of a call as recorded: its CreateTaskResult
// (with the session id to reattach, unsealed by events) and the last
// status change seen.
type loggedTask struct {
	accepted vocab.CallTaskAccepted
	at       time.Time // when call.task_accepted was committed
	status   string    // last recorded status
	message  string    // and its statusMessage
	lastPoll int       // ordinal of the poll that recorded it
	// records and bytes count the call.task_status of the task and their
	// text, which the call's bounds go on counting (task_bounds.go).
	records, bytes int
}

// foldTask folds call.task_accepted and call.task_status into the call.
func (l *runLog) foldTask(e events.Event) error {
	switch e.Type {
	case vocab.TypeCallTaskAccepted:
		p, err := vocab.Decode[vocab.CallTaskAccepted](e)
		if err != nil {
			return err
		}
		if c := l.calls[p.EffectID]; c != nil {
			at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
			if err != nil {
				return fmt.Errorf("call.task_accepted at seq %d: created_at %q: %w", e.Seq, e.CreatedAt, err)
			}
			c.task = &loggedTask{accepted: p, at: at, status: p.Status, message: p.StatusMessage}
			c.result = nil // a result now comes from tasks/result
		}
		return l.move(e, p)
	case vocab.TypeCallTaskStatus:
		p, err := vocab.Decode[vocab.CallTaskStatus](e)
		if err != nil {
			return err
		}
		if c := l.calls[p.EffectID]; c != nil && c.task != nil {
			c.task.status, c.task.message, c.task.lastPoll = p.Status, p.StatusMessage, p.Poll
			c.task.records++
			c.task.bytes += statusBytes(transport.TaskStatus(p.Status), p.StatusMessage)
		}
		return l.move(e, p)
	}
	return nil
}

// resumeTask carries on a call whose task was accepted before the process
// ended: a result already in the log concludes it; otherwise the same task
// is asked about again, which is never a resend, so it is legal for every
// class: on the recorded session (its MCP-Session-Id, no initialize) when
// the log kept it sealed, else on a new session (only its digest was
// kept). A task the server no longer knows there (or a 404 for the
// session) is lost: the class rules decide (pollTask). The task call's
// deadline still counts from the recorded CreateTaskResult.
func (c *call) resumeTask(ctx context.Context, lc *loggedCall) (any, error) {
	if lc.task == nil {
		return nil, fmt.Errorf("call %s is %s but its call.task_accepted is not in the log", c.effectID, c.m.State)
	}
	lt := lc.task
	c.taskID, c.taskShown, c.polls, c.lastStatus = lt.accepted.TaskID, lt.accepted.TaskID, lt.lastPoll, lt.status+"\x00"+lt.message
	c.tb = taskBounds{start: lt.at, ttl: time.Duration(lt.accepted.TTLMs) * time.Millisecond, records: lt.records, bytes: lt.bytes}
	if lc.result != nil { // tasks/result reached the log: conclude, never ask again
		c.viaTask = true
		return c.conclude(ctx, *lc.result)
	}
	if len(c.rn.wf.Spec.MCPServers[c.remote].Command) > 0 {
		return c.stdioTaskLost(ctx)
	}
	rs, err := c.rn.pollSession(ctx, c, lt)
	if err != nil {
		f := &callFailure{kind: transport.KindUnsupported, msg: fmt.Sprintf("call %s: reach session %s of %q to poll task %s: %v",
			c.effectID, lt.accepted.SessionIDDigest, c.remote, c.taskRef(), err)}
		c.lastErr = f
		c.rn.pending = append(c.rn.pending, c.errorRecord(f))
		if _, ferr := c.fire(fsm.FailPossiblyExecuted, f.msg, false); ferr != nil {
			return nil, errors.Join(f, ferr)
		}
		return nil, f
	}
	c.rs, c.gen = rs, rs.gen
	c.inline = c.modern() // 2026-07-28: a new connection asks about the same task
	ts := c.taskSession()
	if ts == nil {
		return nil, fmt.Errorf("call %s: remote %q: the session speaks no tasks", c.effectID, c.remote)
	}
	switch c.m.State {
	case fsm.InputRequired:
		return c.cancelTask(ctx, ts, "input_required", lt.message)
	case fsm.Cancelling:
		if strings.HasPrefix(c.reason, ReasonTaskDeadline+": ") {
			return c.cancelTask(ctx, ts, "timeout", "")
		}
		c.cancelled = true
		return c.cancelTask(ctx, ts, "user", "")
	}
	if _, err := c.fire(fsm.FailAmbiguous, ReasonInterrupted, false); err != nil {
		return nil, err
	}
	// From the last status recorded, as the ended process would have gone
	// on: polling while working, tasks/result once completed or failed.
	t := &transport.Task{ID: lt.accepted.TaskID, RedactedID: lt.accepted.TaskID, Status: transport.TaskStatus(lt.status), StatusMessage: lt.message,
		PollInterval: time.Duration(lt.accepted.PollIntervalMs) * time.Millisecond}
	if c.inline && (t.Status == transport.TaskCompleted || t.Status == transport.TaskFailed) {
		t.Status = transport.TaskWorking // the outcome rides on tasks/get: ask for it again
	}
	return c.pollTask(ctx, ts, t)
}

// pollSession is the session a resumed call polls its task on: the
// recorded one reattached when its id was kept (sealed), else a new
// session of its own (the next generation, session.opened marked
// taskPoll), its catalog committed before the first poll.
func (rn *run) pollSession(ctx context.Context, c *call, lt *loggedTask) (*remoteState, error) {
	if lt.accepted.SessionID != "" {
		return rn.reattach(ctx, c, lt)
	}
	rn.sessMu.Lock()
	defer rn.sessMu.Unlock()
	return rn.openWith(ctx, c.remote, c.task.ID, c.attempt, false, true)
}

// stdioTaskLost concludes a resumed call whose task a stdio server held: a
// stdio session has no id to reattach, and its process ended with the
// agentctl that started it (parent-death signal, or resume ending it), so
// the task is lost, as one the server no longer knows: the class rules
// decide (a new task on a new process, once, or uncertain "task_lost").
func (c *call) stdioTaskLost(ctx context.Context) (any, error) {
	err := &callFailure{kind: transport.KindSessionExpired, msg: fmt.Sprintf("task %s: the stdio server that held it ended with the agentctl process that started it", c.taskRef())}
	c.lastErr = err
	c.rn.pending = append(c.rn.pending, c.errorRecord(err))
	dec, ferr := c.fire(fsm.TaskLost, err.msg, false)
	if ferr != nil {
		return nil, errors.Join(err, ferr)
	}
	if dec != fsm.DecideReconnect {
		return nil, fmt.Errorf("%s: %w", fsm.ReasonTaskLost, err)
	}
	if err := c.reconnect(ctx); err != nil {
		return nil, err
	}
	return c.send(ctx) // a new task: the class allows it, once
}

// reattach binds the recorded session of lt without a new initialize and
// records session.reattached; the session is closed when the run ends.
func (rn *run) reattach(ctx context.Context, c *call, lt *loggedTask) (*remoteState, error) {
	conn, err := rn.conn(c.remote)
	if err != nil {
		return nil, err
	}
	ra, ok := conn.(Reattacher)
	if !ok {
		return nil, fmt.Errorf("remote %q cannot reattach a recorded session (replay answers no task polls)", c.remote)
	}
	sess, err := ra.Reattach(lt.accepted.SessionID)
	if err != nil {
		return nil, err
	}
	if _, ok := sess.(TaskSession); !ok {
		return nil, fmt.Errorf("remote %q: the reattached session speaks no tasks", c.remote)
	}
	rs := &remoteState{name: c.remote, sess: sess, gen: lt.accepted.Generation, owner: c.task.ID, attached: map[string]bool{}}
	rn.mu.Lock()
	rn.opened = append(rn.opened, rs)
	rn.mu.Unlock()
	rn.later(events.Record{Stream: sessionStream(c.remote, rs.gen), Type: vocab.TypeSessionReattached,
		Payload: vocab.SessionReattached{Remote: c.remote, Generation: rs.gen, SessionIDDigest: lt.accepted.SessionIDDigest,
			TaskIDDigest: lt.accepted.TaskIDDigest, TaskID: c.task.ID}})
	_ = ctx
	return rs, nil
}
