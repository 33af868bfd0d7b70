package workflow

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport"
)

// Bounds of an MCP task call (issue 27): how long it may last, and what
// its polls may leave in the log.
//
// Time: from the CreateTaskResult, a task call ends after the server's
// maxSeconds (mcpServers.NAME.maxSeconds) or the server's task ttl plus
// a grace, whichever comes first, and after defaultTaskBound when neither
// is set. Reaching the bound sends tasks/cancel and ends the call
// uncertain (the task may have run), exactly like a task's own
// timeoutSeconds; only the user's cancel ends it cancelled.
//
// Log: status changes are recorded (call.task_status) while a call's
// records stay under maxTaskStatusRecords and their text under
// maxTaskStatusBytes; later changes are counted, not recorded, and the
// count rides in the next record (Folded): the status that ends polling,
// which is always recorded, or a last record of the status last seen
// when polling ends otherwise. Poll frames are kept with the statuses
// they carry while they total under maxTaskPollFrameBytes; a status
// recorded without them says so (FramesOmitted).
const (
	defaultTaskBound      = time.Hour
	minTaskTTLGrace       = time.Second
	maxTaskTTLGrace       = 5 * time.Minute
	maxTaskStatusRecords  = 64
	maxTaskStatusBytes    = 16 << 10
	maxTaskPollFrameBytes = 1 << 20
)

// ReasonTaskDeadline starts the reason of a task call ended by a deadline:
// the task's timeoutSeconds, or the bound of the task call.
const ReasonTaskDeadline = "task_deadline"

// taskBounds is what a call made as an MCP task knows of its bounds.
type taskBounds struct {
	start time.Time     // when the CreateTaskResult came (as recorded)
	ttl   time.Duration // the server's ttl for the task, 0 when unlimited
	// records and bytes count the call.task_status of the task and their
	// text; frameBytes the poll frames kept with them.
	records, bytes, frameBytes int
	// folded counts the changes seen but not recorded since the last
	// record; seen is the status last seen and seenPoll the poll that
	// first showed it.
	folded   int
	seen     transport.Task
	seenPoll int
}

// deadlineCause is the cause of a context that a deadline bounding a task
// call ended: what set it, for the reason that ends the call.
type deadlineCause struct{ what string }

func (d *deadlineCause) Error() string { return d.what + " reached" }

// withTaskTimeout is context.WithTimeout for a task's timeoutSeconds,
// with a cause naming it.
func withTaskTimeout(ctx context.Context, taskID string, seconds int) (context.Context, context.CancelFunc) {
	return context.WithTimeoutCause(ctx, time.Duration(seconds)*time.Second,
		&deadlineCause{what: fmt.Sprintf("task %s timeoutSeconds (%ds)", taskID, seconds)})
}

// taskDeadline is when the task call must end, and what sets it.
func (c *call) taskDeadline() (time.Time, string) {
	srv := c.rn.wf.Spec.MCPServers[c.remote]
	d, what := defaultTaskBound, fmt.Sprintf("the task bound (%s by default)", defaultTaskBound)
	set := false
	if srv.MaxSeconds > 0 {
		d, what, set = time.Duration(srv.MaxSeconds)*time.Second, fmt.Sprintf("mcpServers.%s.maxSeconds (%ds)", c.remote, srv.MaxSeconds), true
	}
	if ttl := c.tb.ttl; ttl > 0 {
		grace := min(max(ttl/10, minTaskTTLGrace), maxTaskTTLGrace)
		if !set || ttl+grace < d {
			d, what = ttl+grace, fmt.Sprintf("the server's task ttl (%s) plus %s", ttl, grace)
		}
	}
	return c.tb.start.Add(d), what
}

// boundTask returns ctx ended at the task call's deadline (a replay
// answers from its source, which recorded how the deadline ended it).
func (c *call) boundTask(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.rn.replay {
		return ctx, func() {}
	}
	at, what := c.taskDeadline()
	return context.WithDeadlineCause(ctx, at, &deadlineCause{what: what})
}

// deadlineErr names the deadline that ended ctx in err, which the call
// records and ends with; err as is when ctx was not ended by one.
func deadlineErr(ctx context.Context, err error) error {
	var dc *deadlineCause
	if ctx.Err() == nil || !errors.As(context.Cause(ctx), &dc) {
		return err
	}
	return fmt.Errorf("%s: %s: %w", ReasonTaskDeadline, dc.Error(), err)
}

// statusFits reports whether a status change is recorded: always when it
// ends polling, else while the records and their text are under bounds.
func (c *call) statusFits(next *transport.Task) bool {
	switch {
	case next.Status != transport.TaskWorking:
		return true
	case isFolded(next): // a replay's stand-in for a change its source folded
		return false
	}
	return c.tb.records < maxTaskStatusRecords-1 && c.tb.bytes+statusBytes(next.Status, next.StatusMessage) <= maxTaskStatusBytes
}

func statusBytes(s transport.TaskStatus, msg string) int { return len(s) + len(msg) }

// keepFrames returns the frames of a poll whose status is recorded, or
// none once the call's kept poll frames would pass their bound. A
// replay's references are kept as the source's frames were.
func (c *call) keepFrames(frames []events.Record) []events.Record {
	n := 0
	for _, r := range frames {
		if f, ok := r.Payload.(vocab.Frame); ok {
			n += len(f.Body)
		}
	}
	if c.tb.frameBytes+n > maxTaskPollFrameBytes {
		return nil
	}
	c.tb.frameBytes += n
	return frames
}

// recordStatus queues call.task_status for status s (with msg) first
// shown by poll, carrying the changes folded since the last record.
func (c *call) recordStatus(s transport.TaskStatus, msg string, poll, folded int, framesOmitted bool) {
	c.tb.records++
	c.tb.bytes += statusBytes(s, msg)
	c.rn.later(events.Record{Stream: c.stream(), Type: vocab.TypeCallTaskStatus,
		Payload: vocab.CallTaskStatus{EffectID: c.effectID, Status: string(s), StatusMessage: msg, Poll: poll,
			Folded: folded, FramesOmitted: framesOmitted}})
}

// flushFolded records, when polling ends with changes folded, the status
// last seen (first shown by seenPoll) with the count of the others.
func (c *call) flushFolded() {
	if c.tb.folded == 0 {
		return
	}
	c.recordStatus(c.tb.seen.Status, c.tb.seen.StatusMessage, c.tb.seenPoll, c.tb.folded-1, false)
	c.tb.folded = 0
}
