package workflow

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// MCP tasks (issue 16). A call sent as a task is answered with a
// CreateTaskResult, committed (call.task_accepted, with the response frame
// and the accepted transition) before the first tasks/get: from then on a
// lost stream, a timeout or a crash is answered by asking about the same
// task again, for every class, never by sending the call again.

// maxPollFailures bounds consecutive failed polls (timeouts, lost streams,
// 5xx) before the call gives up learning the task's fate (uncertain).
const maxPollFailures = 5

// cancelTaskTimeout bounds the best-effort tasks/cancel.
const cancelTaskTimeout = 2 * time.Second

// useTask decides whether a call is sent as an MCP task, from the tool's
// execution.taskSupport, the action's `task:` and the server's `useTasks`.
// refuse, when not "", says why the call must fail before anything is sent.
func useTask(support transport.TaskSupport, actionTask bool, policy string) (use bool, refuse string) {
	switch support {
	case transport.TaskSupportRequired:
		if policy == spec.UseTasksNever {
			return false, "requires a task (execution.taskSupport = required) but the server's useTasks is never"
		}
		return true, ""
	case transport.TaskSupportOptional:
		if policy == spec.UseTasksNever {
			return false, ""
		}
		return actionTask || policy == spec.UseTasksAlways, ""
	}
	return false, ""
}

// taskSession is the call's session as a TaskSession (a network session,
// or a replay session answering from the recorded task), nil when it
// speaks no tasks.
func (c *call) taskSession() TaskSession {
	ts, _ := c.rs.sess.(TaskSession)
	return ts
}

// prepareTask runs before the dispatch transition: a tools/list_changed
// notification makes it re-list and compare the tool's digest, and it
// decides whether the call goes out as a task. A failure here is
// definitive: nothing was sent.
func (c *call) prepareTask(ctx context.Context) error {
	ts := c.taskSession()
	if ts != nil && ts.ToolsChanged() {
		if err := c.relist(ctx); err != nil {
			return err
		}
	}
	support := c.tool.TaskSupport()
	use, refuse := c.decideTask()
	if refuse != "" {
		return c.failDefinitive(ctx, &callFailure{kind: transport.KindUnsupported, msg: fmt.Sprintf("tool %q %s; not sent", c.tool.Name, refuse)})
	}
	if use && (ts == nil || !ts.ToolCallTasks()) && !c.modern() {
		if support == transport.TaskSupportRequired {
			return c.failDefinitive(ctx, &callFailure{kind: transport.KindUnsupported,
				msg: fmt.Sprintf("tool %q requires task augmentation (execution.taskSupport = required) but server %q does not advertise tasks for tools/call; not sent", c.tool.Name, c.remote)})
		}
		use = false // the spec: no params.task without the capability
	}
	c.useTask = use && !c.modern() // at 2026-07-28 the server decides (send)
	return nil
}

// decideTask sets the call's task ttl and returns useTask's decision for
// its tool, action and remote. A resumed call decides again, so that a
// resend after an ambiguous failure is a task again.
func (c *call) decideTask() (use bool, refuse string) {
	action := c.rn.wf.Action(c.task)
	c.ttl = time.Duration(action.TaskTTL()) * time.Second
	return useTask(c.tool.TaskSupport(), action.Task, c.rn.wf.Spec.MCPServers[c.remote].TasksPolicy())
}

// relist refreshes tools/list after notifications/tools/list_changed and
// fails the call (nothing sent) if its tool is gone or changed.
func (c *call) relist(ctx context.Context) error {
	rn, rs := c.rn, c.rs
	base := vocab.Frame{Remote: rs.name, Generation: rs.gen, TaskID: c.task.ID, Attempt: c.attempt}
	rn.sessMu.Lock()
	cat, err := rs.sess.ListTools(ctx, rn.sink(sessionStream(rs.name, rs.gen), base))
	rn.sessMu.Unlock()
	if err != nil {
		return c.failDefinitive(ctx, fmt.Errorf("tools/list after notifications/tools/list_changed: %w", err))
	}
	rec := vocab.SessionCatalog{Remote: rs.name, Generation: rs.gen, TaskID: c.task.ID, CatalogDigest: cat.Digest(), Tools: rn.recordedTools(rs.name, toolInfos(cat)), Warnings: cat.Warnings}
	rn.later(events.Record{Stream: sessionStream(rs.name, rs.gen), Type: vocab.TypeSessionCatalog, Payload: rec})
	if rs.pool != nil {
		rs.pool.retire() // the pool's catalog is stale: the next run opens anew
	}
	tool, ok := cat.Find(c.tool.Name)
	switch {
	case !ok:
		return c.failDefinitive(ctx, &callFailure{kind: fsm.ReasonToolMissing,
			msg: fmt.Sprintf("%s: tool %q is gone from %q after notifications/tools/list_changed; not sent", fsm.ReasonToolMissing, c.tool.Name, rs.name)})
	case tool.Digest() != c.schemaDigest:
		return c.failDefinitive(ctx, &callFailure{kind: fsm.ReasonSchemaChanged,
			msg: fmt.Sprintf("%s: tool %q changed schema after notifications/tools/list_changed (%s → %s); not sent", fsm.ReasonSchemaChanged, c.tool.Name, c.schemaDigest, tool.Digest())})
	}
	return nil
}

// urlElicitation turns a -32042 answer into the uncertain outcome's
// trigger and reason: the sanitised hosts an operator must visit.
func urlElicitation(err error) (string, bool) {
	hosts, ok := transport.URLElicitationHosts(err)
	if !ok {
		return "", false
	}
	if len(hosts) == 0 {
		return "the server needs a person to visit a URL first (no usable host in its answer)", true
	}
	return "the server needs a person to visit a URL first; hosts: " + strings.Join(hosts, ", "), true
}

// accepted commits the CreateTaskResult (call.task_accepted, the held
// response frame and the accepted transition, in one transaction) and then
// polls the task. The raw session id, a bearer credential, is recorded
// only when the log seals it; the task id only as redacted.
func (c *call) accepted(ctx context.Context, ts TaskSession, tc *transport.TaskCall) (any, error) {
	t := tc.Task
	shown := t.RedactedID
	if shown == "" {
		shown = t.ID
	}
	c.taskID, c.taskShown, c.polls = t.ID, shown, 0
	c.tb = taskBounds{start: time.Now(), ttl: t.TTL}
	p := vocab.CallTaskAccepted{EffectID: c.effectID, TaskID: shown, TaskIDDigest: transport.TaskIDDigest(shown),
		SessionIDDigest: c.rs.sess.Info().IDDigest, Remote: c.remote, Generation: c.gen, Status: string(t.Status), StatusMessage: t.StatusMessage,
		TTLMs: t.TTL.Milliseconds(), PollIntervalMs: t.PollInterval.Milliseconds(), JSONRPCID: tc.ID}
	if c.rn.r.DB.Encryption().Enabled {
		p.SessionID = ts.SessionID()
	}
	c.rn.later(events.Record{Stream: c.stream(), Type: vocab.TypeCallTaskAccepted, Payload: p})
	c.lastStatus = statusKey(t)
	if _, err := c.fire(fsm.TaskAccepted, "", false); err != nil {
		return nil, err
	}
	return c.pollTask(ctx, ts, t)
}

// statusKey is what makes a task's answer a change: its status and
// message and, at 2026-07-28, the keys of its input requests (each new
// request is recorded with the poll that carried it, for the replay).
func statusKey(t *transport.Task) string {
	k := string(t.Status) + "\x00" + t.StatusMessage
	if t.Input != nil {
		k += "\x00" + strings.Join(slices.Sorted(maps.Keys(t.Input.Requests)), "\x00")
	}
	return k
}

// pollTask asks about the recorded task until it ends, then fetches its
// result (validated exactly like a direct result) or ends the call as the
// machine decides. Only status changes are recorded (call.task_status,
// with the frames of the poll that saw them), within the call's bounds;
// identical polls are folded, and so are changes beyond the bounds
// (task_bounds.go). The whole of it is bounded in time: the task call's
// deadline (or the task's timeoutSeconds) ends it uncertain, after
// tasks/cancel; the user's cancel ends it cancelled.
func (c *call) pollTask(ctx context.Context, ts TaskSession, t *transport.Task) (any, error) {
	rn := c.rn
	pctx, stop := c.boundTask(ctx)
	defer stop()
	var held []events.Record
	pollSink, observe := c.pollSink(&held), c.pollObserver(&held)
	failures := 0
	for {
		last, err := ts.PollTask(pctx, t, pollSink, observe)
		held = nil
		if last != nil {
			t = last
		}
		if err == nil {
			switch t.Status {
			case transport.TaskCompleted, transport.TaskFailed:
				if c.inline {
					return c.taskOutcome(ctx, t)
				}
				res, rerr := ts.TaskResult(pctx, t.ID, rn.frameSink(c.stream(), c.frameBase(), true))
				if rerr == nil {
					c.viaTask = true
					return c.complete(ctx, res)
				}
				err = rerr
			case transport.TaskCancelled:
				f := &callFailure{kind: fsm.ReasonTaskCancelledByServer, msg: fmt.Sprintf("task %s was cancelled by the server: %s", c.taskRef(), t.StatusMessage)}
				return nil, c.failWith(fsm.TaskCancelled, f, t.StatusMessage)
			case transport.TaskInputRequired:
				if c.inline && t.Input != nil {
					answered, err := c.updateTask(ctx, ts, t)
					if err != nil || !answered {
						return nil, err
					}
					t = pollAgain(t)
					continue
				}
				if _, ferr := c.fire(fsm.TaskInputRequired, t.StatusMessage, false); ferr != nil {
					return nil, ferr
				}
				return c.cancelTask(ctx, ts, "input_required", t.StatusMessage)
			}
		}
		if err == nil {
			continue
		}
		err = deadlineErr(pctx, err)
		ended, cancelled := replayedCtxEnd(err) // a replay's context never ends: its source's did
		repoll := pctx.Err() == nil && !ended && !isDivergence(err) && !transport.TaskLost(err) &&
			transport.PollAgain(err) && failures+1 < maxPollFailures
		if !repoll {
			c.flushFolded() // polling ends: the changes folded since the last record are counted
		}
		c.lastErr = err
		rn.pending = append(rn.pending, c.errorRecord(err))
		switch {
		case pctx.Err() != nil || ended:
			cause := "timeout" // a deadline: the call may have run, it ends uncertain
			if errors.Is(ctx.Err(), context.Canceled) || cancelled {
				c.cancelled, cause = true, "user"
			}
			if _, ferr := c.fire(fsm.Cancel, err.Error(), false); ferr != nil {
				return nil, errors.Join(err, ferr)
			}
			return c.cancelTask(ctx, ts, cause, "")
		case isDivergence(err): // a replay asked what its source never did (call.error pending)
			if _, ferr := c.fire(fsm.FailDefinitive, err.Error(), false); ferr != nil {
				return nil, errors.Join(err, ferr)
			}
			return nil, err
		case transport.TaskLost(err):
			if transport.KindOf(err) == transport.KindSessionExpired {
				rn.pending = append(rn.pending, events.Record{Stream: sessionStream(c.rs.name, c.rs.gen), Type: vocab.TypeSessionExpired,
					Payload: vocab.SessionRef{Remote: c.rs.name, Generation: c.rs.gen, TaskID: c.task.ID}})
				rn.retire(c.rs)
			}
			dec, ferr := c.fire(fsm.TaskLost, fmt.Sprintf("task %s: %v", c.taskRef(), err), false)
			if ferr != nil {
				return nil, errors.Join(err, ferr)
			}
			if dec != fsm.DecideReconnect {
				return nil, fmt.Errorf("%s: task %s: %w", fsm.ReasonTaskLost, c.taskRef(), err)
			}
			if err := c.reconnect(ctx); err != nil {
				return nil, err
			}
			return c.send(ctx) // a new task: the class allows it, once
		case repoll:
			failures++
			if _, ferr := c.fire(fsm.FailAmbiguous, err.Error(), false); ferr != nil {
				return nil, errors.Join(err, ferr)
			}
			continue
		case transport.KindOf(err) == transport.KindRemoteError && c.viaTaskResult(err):
			return nil, c.failDefinitive(ctx, err) // tasks/result's error is the call's
		default:
			if _, ferr := c.fire(fsm.FailPossiblyExecuted, fmt.Sprintf("task %s: %v", c.taskRef(), err), false); ferr != nil {
				return nil, errors.Join(err, ferr)
			}
			return nil, err
		}
	}
}

// pollSink holds the frames of a poll in *held until observe decides
// whether the poll is recorded.
func (c *call) pollSink(held *[]events.Record) transport.Sink {
	return func(_ context.Context, f transport.Frame) error {
		if f.Kind == replayedKind { // a replay's reference to the poll's recorded frames
			rec, err := replayedRecord(c.stream(), c.frameBase(), f.Body)
			if err != nil {
				return err
			}
			*held = append(*held, rec)
			return nil
		}
		fr := c.frameBase()
		fr.Dir, fr.Kind, fr.Method, fr.ID, fr.HTTPStatus, fr.EventID = f.Dir, f.Kind, f.Method, f.ID, f.HTTPStatus, f.EventID
		fr.Body = frameBody(f.Body)
		*held = append(*held, events.Record{Stream: c.stream(), Type: vocab.FramePrefix + f.Kind, Payload: vocab.StoredFrame(c.stream(), fr)})
		return nil
	}
}

// pollObserver sees each tasks/get answer: a status change is recorded
// (call.task_status, with the poll's frames from *held) within the call's
// bounds, identical answers are folded, and the first poll that finds the
// task working moves the call accepted → polling.
func (c *call) pollObserver(held *[]events.Record) func(next *transport.Task) error {
	rn := c.rn
	return func(next *transport.Task) error {
		c.polls++
		frames := *held
		*held = nil
		working := c.m.State == fsm.Accepted && next.Status == transport.TaskWorking
		changed := statusKey(next) != c.lastStatus
		if changed {
			c.lastStatus, c.tb.seen, c.tb.seenPoll = statusKey(next), *next, c.polls
		}
		record := changed && c.statusFits(next)
		if changed && !record {
			c.tb.folded++ // beyond the call's bounds: counted, recorded with the next record
		}
		if !record && !working {
			return nil // folded: the next change's poll ordinal counts it
		}
		kept := c.keepFrames(frames)
		rn.pending = append(rn.pending, kept...)
		if record {
			c.recordStatus(next.Status, next.StatusMessage, c.polls, c.tb.folded, len(kept) == 0)
			c.tb.folded = 0
		}
		if working { // the first poll that finds it working: accepted → polling
			_, err := c.fire(fsm.TaskWorking, "", false)
			return err
		}
		return rn.append()
	}
}

// viaTaskResult reports whether err is tasks/result's answer (the call's
// own JSON-RPC error), not a failure of tasks/get.
func (c *call) viaTaskResult(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.Op == "tasks/result"
}

// failWith ends the call failed through trigger t with f as its error.
func (c *call) failWith(t fsm.Trigger, f *callFailure, detail string) error {
	c.lastErr = f
	c.rn.pending = append(c.rn.pending, c.errorRecord(f))
	if _, err := c.fire(t, detail, false); err != nil {
		return errors.Join(f, err)
	}
	return f
}

// cancelTask sends tasks/cancel (best effort, bounded, recorded) and ends
// the call: cancelled when the server confirms a task we cancelled, an
// outcome when the task had already finished, uncertain otherwise (and
// always after input_required: part of the work may be done).
func (c *call) cancelTask(ctx context.Context, ts TaskSession, cause, statusMessage string) (any, error) {
	rn := c.rn
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTaskTimeout)
	defer cancel()
	got, err := ts.CancelTask(cctx, c.taskID, rn.sink(c.stream(), c.frameBase()))
	if err == nil && (got == nil || c.inline) { // 2026-07-28: only acknowledged; tasks/get tells the final state
		got, err = c.cancelledState(cctx, ts)
	}
	rec := vocab.CallTaskCancel{EffectID: c.effectID, Cause: cause}
	if err != nil {
		rec.Error = err.Error()
	} else {
		rec.Status, rec.Confirmed = string(got.Status), got.Status == transport.TaskCancelled
	}
	rn.later(events.Record{Stream: c.stream(), Type: vocab.TypeCallTaskCancel, Payload: rec})
	outcome := func(t fsm.Trigger, detail string, out error) (any, error) {
		if _, ferr := c.fire(t, detail, false); ferr != nil {
			return nil, errors.Join(out, ferr)
		}
		return nil, out
	}
	if c.inline && err == nil && c.m.State == fsm.Cancelling && (got.Status == transport.TaskCompleted || got.Status == transport.TaskFailed) {
		c.cancelled = false // the task finished first: its outcome stands
		return c.taskOutcome(cctx, got)
	}
	if c.m.State == fsm.InputRequired {
		msg := fmt.Sprintf("%s: task %s asked for input agentctl does not offer: %s (tasks/cancel sent)", fsm.ReasonInputRequired, c.taskRef(), statusMessage)
		if rec.Confirmed {
			return outcome(fsm.TaskCancelled, statusMessage, errors.New(msg))
		}
		return outcome(fsm.FailPossiblyExecuted, statusMessage, errors.New(msg))
	}
	// A deadline, not the user, asked for the cancel: the task may have
	// run, so however the server answers the call ends uncertain.
	deadline := func(what string) (any, error) {
		detail := fmt.Sprintf("%s; tasks/cancel %s", c.deadlineText(), what)
		return outcome(fsm.FailPossiblyExecuted, detail, fmt.Errorf("task %s: %s (the task may have run)", c.taskRef(), detail))
	}
	if rec.Confirmed {
		if cause == "timeout" {
			return deadline("confirmed")
		}
		return outcome(fsm.TaskCancelled, "", fmt.Errorf("task %s cancelled: %w", c.taskRef(), context.Canceled))
	}
	if isDivergence(err) { // a replay: cancelling, so not confirmed
		return outcome(fsm.FailDefinitive, err.Error(), err)
	}
	if err != nil && transport.KindOf(err) == transport.KindRemoteError {
		// Refused, perhaps because the task had already finished: ask.
		if t, gerr := ts.GetTask(cctx, c.taskID, rn.sink(c.stream(), c.frameBase())); gerr == nil {
			switch t.Status {
			case transport.TaskCompleted, transport.TaskFailed:
				if c.inline {
					c.cancelled = false
					return c.taskOutcome(cctx, t)
				}
				res, rerr := ts.TaskResult(cctx, c.taskID, rn.frameSink(c.stream(), c.frameBase(), true))
				if rerr == nil {
					c.viaTask, c.cancelled = true, false
					return c.complete(cctx, res)
				}
				if c.viaTaskResult(rerr) && transport.KindOf(rerr) == transport.KindRemoteError {
					c.cancelled = false
					return nil, c.failDefinitive(cctx, rerr)
				}
			case transport.TaskCancelled:
				if cause == "timeout" {
					return deadline("refused, the task is cancelled")
				}
				return outcome(fsm.TaskCancelled, "", fmt.Errorf("task %s cancelled: %w", c.taskRef(), context.Canceled))
			}
		}
	}
	detail := "tasks/cancel unconfirmed"
	if err != nil {
		detail += ": " + err.Error()
	}
	if cause == "timeout" {
		return deadline(strings.TrimPrefix(detail, "tasks/cancel "))
	}
	return outcome(fsm.FailPossiblyExecuted, detail, fmt.Errorf("task %s: %s", c.taskRef(), detail))
}

// deadlineText is the failure by which a deadline ended the task call, as
// recorded (its reason, after a resume).
func (c *call) deadlineText() string {
	if c.lastErr != nil {
		return c.lastErr.Error()
	}
	return c.reason
}

// taskRef names the task for messages: its id, redacted, when short and
// plain, else the digest of that (remote text is not printed).
func (c *call) taskRef() string {
	id := c.taskShown
	if id == "" {
		id = c.taskID
	}
	if len(id) <= 64 && isPlainID(id) {
		return id
	}
	return transport.TaskIDDigest(id)
}

func isPlainID(s string) bool {
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r == ':' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')) {
			return false
		}
	}
	return s != ""
}
