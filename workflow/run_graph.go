package workflow

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/workflow/spec"
)

// The task graph (docs/WORKFLOWS.md): a task starts once every task it needs has
// ended (succeeded, or failed with continueOnError), up to rn.concurrency
// tasks in flight, the ready ones in file order. With concurrency 1 that
// is TasksInOrder exactly. A task that fails (or ends uncertain) without
// continueOnError stops the run: no task starts after it, the tasks in
// flight finish (a call is never cancelled to stop a run: that would make
// it uncertain), and every task not started is recorded task.skipped with
// the reason. The run ends with the worst task: uncertain beats cancelled
// beats failed beats succeeded.
//
// Commits. A task that succeeds leaves its last records (the response, the
// call's outcome, task.finished) uncommitted: a carry. The next task the
// scheduler starts takes every carry not yet taken and commits them first
// in its own first commit, before any byte of its own is sent, so between
// two tasks of a chain there is one commit, as in a sequential run. A task
// whose needed task's carry went with another task's first commit waits
// until that commit is durable before it commits anything: it never starts
// before the tasks it needs are recorded finished. Carries nobody took
// commit on their own while other tasks are still in flight (so that a
// finished task never waits in memory for a slow sibling), or with
// run.finished once nothing runs: nothing is lost when another task fails.

// carry is the deferred records of a task that succeeded.
type carry struct {
	recs []events.Record
	// done is closed once the commit that took recs returned; err is its error.
	done chan struct{}
	err  error
	// chained are carries a task took but never committed (it ended with
	// nothing of its own to commit, e.g. a resumed task that had
	// succeeded): their records are in recs now, and they are done when
	// this one is.
	chained []*carry
}

// settle marks c and the carries chained to it committed (or failed with err).
func (c *carry) settle(err error) {
	c.err = err
	close(c.done)
	for _, x := range c.chained {
		x.settle(err)
	}
}

// taskEnd is how a task goroutine ended.
type taskEnd struct {
	idx      int
	out      any
	fail     *Error
	pending  []events.Record
	carrying []*carry
}

// task states in the scheduler.
const (
	tsWaiting = iota
	tsRunning
	tsDone // succeeded, or failed with continueOnError: dependents may run
	tsFailed
	tsSkipped
)

// scheduler runs one run's task graph. Its state is the loop's alone:
// task goroutines never touch it, they report on ended (a task that runs
// alone runs in the loop's goroutine, and its end is lone).
type scheduler struct {
	rn    *run
	tasks []spec.TaskSpec
	needs [][]int
	state []int    // by task: tsWaiting…tsSkipped
	limit int      // tasks in flight at most
	carry []*carry // by task, for the tasks that need it
	// untaken are the carries no commit has taken yet, in the order their
	// tasks ended: a task's end adds its carry, and the next start, flush
	// or run.finished takes them all, so none is found by a scan of every
	// task. Every pass of the loop takes them, so the list never holds
	// more than one (end order and file order cannot differ).
	untaken []*carry
	flushed []*carry // carries committed on their own while other tasks ran
	ended   chan taskEnd
	lone    *taskEnd // the end of the task that ran in the loop's goroutine, not yet taken in
	running int
	stop    *Error // the failure that stops the run, with its task
	stopBy  string // id of the task whose failure stopped the run
	worst   *Error // the worst failure, continueOnError ones included when uncertain
}

// execute runs the task graph to its end and records run.finished (or,
// after a worker's graceful stop, leaves the run resumable).
func (rn *run) execute(ctx context.Context) *Result {
	s := &scheduler{rn: rn, tasks: rn.wf.Spec.Tasks, needs: rn.wf.NeedsByIndex(), limit: max(rn.concurrency, 1), ended: make(chan taskEnd)}
	s.state = make([]int, len(s.tasks))
	s.carry = make([]*carry, len(s.tasks))
	for {
		s.startReady(ctx)
		if s.running == 0 {
			break
		}
		s.flushUntaken()
		s.end(s.next())
	}
	return s.finish(ctx)
}

// next is the end of a task in flight: the lone task's, which ran in the
// loop's goroutine, or the next a task goroutine reports.
func (s *scheduler) next() taskEnd {
	if e := s.lone; e != nil {
		s.lone = nil
		return *e
	}
	return <-s.ended
}

// takeUntaken returns the carries no commit has taken, and forgets them.
func (s *scheduler) takeUntaken() []*carry {
	l := s.untaken
	s.untaken = nil
	return l
}

// ready reports whether task i waits and every task it needs is done.
func (s *scheduler) ready(i int) bool {
	if s.state[i] != tsWaiting {
		return false
	}
	for _, j := range s.needs[i] {
		if s.state[j] != tsDone {
			return false
		}
	}
	return true
}

// startReady starts the ready tasks in file order, up to the limit,
// unless the run is stopping: a failure, ctx, or a worker's graceful stop
// (Runner.Stop), after which the run ends without run.finished, resumable.
func (s *scheduler) startReady(ctx context.Context) {
	if s.stop != nil || ctx.Err() != nil || s.rn.stopping() {
		return
	}
	var buf [8]int
	ready := buf[:0]
	for i := range s.tasks {
		if s.running+len(ready) >= s.limit {
			break
		}
		if s.ready(i) { // starting a task makes no other one ready
			ready = append(ready, i)
		}
	}
	// A task that would run alone (nothing else in flight or starting)
	// runs in this goroutine: the loop would only wait for its end, and a
	// goroutine of its own costs a thread's wake-up on each side of it.
	lone := len(ready) == 1 && s.running == 0
	for _, i := range ready {
		s.start(ctx, i, lone)
	}
}

// start runs task i on a lane of its own: in a goroutine of its own, or
// to its end in this one when lone (its end is then s.lone, for next).
func (s *scheduler) start(ctx context.Context, i int, lone bool) {
	lane := s.rn.fork()
	// Every carry not yet taken rides with this task's first commit;
	// carries of the tasks it needs that another task took are waited for.
	for _, c := range s.takeUntaken() {
		lane.pending = append(lane.pending, c.recs...)
		lane.carrying = append(lane.carrying, c)
	}
	for _, j := range s.needs[i] {
		if c := s.carry[j]; c != nil && !containsCarry(lane.carrying, c) {
			lane.waitFor = append(lane.waitFor, c)
		}
	}
	s.state[i] = tsRunning
	s.running++
	lane.view = s.rn.scopeSnapshot()
	t, ended := s.tasks[i], s.ended
	if lone {
		out, fail := lane.runTask(ctx, t)
		s.lone = &taskEnd{idx: i, out: out, fail: fail, pending: lane.pending, carrying: lane.carrying}
		return
	}
	go func() {
		out, fail := lane.runTask(ctx, t)
		ended <- taskEnd{idx: i, out: out, fail: fail, pending: lane.pending, carrying: lane.carrying}
	}()
}

// flushUntaken commits on its own a carry no task took while others are
// still in flight: a sibling may run for minutes (a slow tool, a retry's
// wait, an MCP task), and a crash meanwhile must find this task finished,
// not its call in flight.
func (s *scheduler) flushUntaken() {
	for _, c := range s.takeUntaken() {
		s.flushed = append(s.flushed, c)
		lane := s.rn.fork()
		lane.pending, lane.carrying = c.recs, []*carry{c}
		go func() { _ = lane.append() }() // its error is c.err, read by finish
	}
}

// end takes in how a task ended: its records, its output, its failure.
func (s *scheduler) end(e taskEnd) {
	s.running--
	t := s.tasks[e.idx]
	switch {
	case len(e.carrying) > 0:
		// The task took carries but ended without a commit (a resumed
		// task the log says is done): commit them now, since tasks may
		// be waiting for them.
		lane := s.rn.fork()
		lane.pending = e.pending
		lane.carrying = []*carry{{recs: e.pending, done: make(chan struct{}), chained: e.carrying}}
		if err := lane.append(); err != nil && e.fail == nil {
			e.fail = s.rn.storageFail(err)
		}
	case len(e.pending) > 0:
		s.carry[e.idx] = &carry{recs: e.pending, done: make(chan struct{})}
		s.untaken = append(s.untaken, s.carry[e.idx])
	}
	switch {
	case e.fail == nil:
		s.state[e.idx] = tsDone
		s.rn.setOutput(t.ID, e.out)
	case t.ContinueOnError && e.fail.Code != ExitStorage:
		s.state[e.idx] = tsDone
		s.rn.setOutput(t.ID, nil)
		if e.fail.Code == ExitUncertain {
			s.worst = worse(s.worst, e.fail)
		}
	default:
		s.state[e.idx] = tsFailed
		s.worst = worse(s.worst, e.fail)
		if s.stop == nil {
			s.stop, s.stopBy = e.fail, t.ID
		}
	}
}

// finish ends the run once no task runs: it waits for the flushed
// carries, records the tasks never started as skipped and run.finished
// with the worst failure or the rendered outputs.
func (s *scheduler) finish(ctx context.Context) *Result {
	rn := s.rn
	for _, c := range s.flushed {
		<-c.done
		if c.err != nil {
			s.worst = worse(s.worst, rn.storageFail(c.err))
		}
	}
	// Carries nobody took commit with run.finished, before the skips.
	for _, c := range s.takeUntaken() {
		rn.pending = append(rn.pending, c.recs...)
	}
	if s.stop == nil && ctx.Err() == nil && rn.stopping() && slices.Contains(s.state, tsWaiting) {
		return rn.stopped()
	}
	s.skipWaiting(ctx)
	if s.worst != nil {
		return rn.finish(nil, s.worst)
	}
	outputs := map[string]any{}
	if len(rn.wf.Spec.Outputs) > 0 {
		v, err := rn.wf.RenderOutputs(rn.scopeSnapshot())
		if err != nil { // a *spec.TemplateError: file:line:col of the template
			return rn.finish(nil, &Error{RunID: rn.id, Code: ExitFailed, Err: err})
		}
		if m, ok := v.(map[string]any); ok {
			outputs = m
		}
	}
	return rn.finish(outputs, nil)
}

// skipWaiting records every task never started as task.skipped with the
// reason; a run cancelled before any failure ends cancelled.
func (s *scheduler) skipWaiting(ctx context.Context) {
	rn := s.rn
	reason := ""
	switch {
	case s.stop != nil:
		reason = fmt.Sprintf("task %s ended %s", s.stopBy, stateFor(s.stop.Code, s.stop.Err))
	case ctx.Err() != nil:
		reason = "run cancelled"
	}
	for i, t := range s.tasks {
		if s.state[i] != tsWaiting {
			continue
		}
		s.state[i] = tsSkipped
		why := reason
		if why == "" { // a task it needs failed: unreachable unless the graph has a cycle
			why = "a task it needs did not succeed"
		}
		rn.later(events.Record{Stream: taskStream(t.ID, rn.nextAttempt(t.ID)), Type: vocab.TypeTaskSkipped,
			Payload: vocab.TaskSkipped{TaskID: t.ID, Attempt: rn.nextAttempt(t.ID), Reason: why}})
		if s.worst == nil && s.stop == nil && ctx.Err() != nil {
			s.worst = &Error{RunID: rn.id, Code: ExitCancelled, Err: fmt.Errorf("task %s: %s", t.ID, why)}
		}
	}
}

// containsCarry reports whether c is in list or chained to one of its
// carries.
func containsCarry(list []*carry, c *carry) bool {
	for _, x := range list {
		if x == c || containsCarry(x.chained, c) {
			return true
		}
	}
	return false
}

// severity orders exit codes for "the worst task": uncertain beats
// cancelled beats any other failure beats success.
func severity(code int) int {
	switch code {
	case ExitOK:
		return 0
	case ExitUncertain:
		return 3
	case ExitCancelled:
		return 2
	}
	return 1
}

// worse returns the worse of two failures; the earlier one on a tie.
func worse(a, b *Error) *Error {
	if a == nil || severity(b.Code) > severity(a.Code) {
		return b
	}
	return a
}

// setOutput records a task's output for the templates of later tasks.
func (rn *run) setOutput(id string, out any) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	rn.scope.Tasks[id] = out
}

// scopeSnapshot is the template scope a task renders with while others
// finish. A template names only tasks its task needs (spec's check), all
// finished before it starts and never changed after, so reading the run's
// outputs under its lock at render time sees what a copy taken at the
// start would: without a copy of every output per task started (O(n²)
// over a run).
func (rn *run) scopeSnapshot() spec.Scope {
	return spec.Scope{Inputs: rn.scope.Inputs, TaskOutput: rn.taskOutput}
}

// taskOutput is the recorded output of the finished task id.
func (rn *run) taskOutput(id string) (any, bool) {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	v, ok := rn.scope.Tasks[id]
	return v, ok
}

// nextAttempt is the attempt a task would start next: 1, or one after the
// last attempt in the log of a resumed run.
func (rn *run) nextAttempt(id string) int {
	if rn.log != nil {
		if a := rn.log.last(id); a != nil {
			return a.started.Attempt + 1
		}
	}
	return 1
}

// closeSessions closes every session the run opened. What a session
// records of its end (a stdio server's process_exit) rides with this
// lane's next commit (run.finished), after the records of the tasks that
// used it: not through the sink of the task that opened it, whose lane
// still holds records another commit took. A session whose close records
// nothing (HTTP: one DELETE) is closed while that commit is made: wait,
// which the caller calls after it, returns once every such close has
// ended, so a run still returns with its sessions closed.
func (rn *run) closeSessions() (wait func()) {
	rn.mu.Lock()
	opened := rn.opened
	rn.opened = nil
	rn.mu.Unlock()
	var wg sync.WaitGroup
	for _, rs := range opened {
		if rs.sess == nil {
			continue
		}
		if rs.pool != nil {
			rs.pool.release() // shared: closed by the pool
			continue
		}
		if sc, ok := rs.sess.(silentCloser); ok && sc.ClosesSilently() {
			wg.Go(func() { _ = rs.sess.Close(context.Background()) })
			continue
		}
		if cr, ok := rs.sess.(closeRecorder); ok {
			base := vocab.Frame{Remote: rs.name, Generation: rs.gen, TaskID: rs.owner, Attempt: rs.attempt}
			_ = cr.CloseWith(context.Background(), rn.laterSink(sessionStream(rs.name, rs.gen), base))
			continue
		}
		_ = rs.sess.Close(context.Background())
	}
	return wg.Wait
}
