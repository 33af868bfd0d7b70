package mcptest

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"
)

// MCP tasks (2025-11-25). With Options.Tasks set, initialize advertises
// tasks.cancel and tasks.requests.tools.call, and a tools/call carrying
// params.task runs the tool's Handler at once (Executed counts it) but
// answers a CreateTaskResult; the outcome is revealed by polling, so tests
// are deterministic: tasks/get answers "working" TaskOptions.WorkingPolls
// times, then the outcome (completed, failed, or what the Handler set with
// SetTaskStatus). tasks/result answers the outcome at once (a real server
// would block until it is ready), tasks/cancel cancels a task whose outcome
// is not yet revealed. Tasks belong to the session that created them, as in
// the reference TypeScript server: another session (unless
// TaskOptions.Shared), an unknown id or an expired task (ExpireTasks) is
// -32602. tasks/result names its task in _meta related-task, unless the
// Handler's result already names one. Faults apply to tasks/* requests like
// to any other method.

// TaskOptions scripts the server's tasks.
type TaskOptions struct {
	// PollInterval is the pollInterval (ms) in every task object; 0 = omitted.
	PollInterval int
	// WorkingPolls is how many tasks/get answer "working" before the
	// outcome; 0 = the first poll sees the outcome.
	WorkingPolls int
	// TTL (ms) answered when the client asks for none; 0 = null (unlimited).
	TTL int
	// StatusMessage, when set, is the statusMessage of the n-th tasks/get
	// (from 1) that answers "working" (default "working"): a task whose
	// message changes on every poll.
	StatusMessage func(poll int) string
	// RawPollInterval, when set, is sent verbatim as every task's
	// pollInterval (e.g. a malformed one); it overrides PollInterval.
	RawPollInterval json.RawMessage
	// Shared makes tasks reachable from every session of the server, not
	// only the one that created them (the spec leaves it to the server):
	// a client that lost its session may ask about its task on a new one.
	Shared bool
	// InputRounds (2026-07-28, the tasks extension): once the working
	// polls are over, the task shows input_required this many times, each
	// with one elicitation/create (Elicit as its params) under the key
	// "ask-N", until a tasks/update answers that key; then the outcome.
	InputRounds int
	// Elicit is the params of the elicitation/create of each input round.
	Elicit json.RawMessage
}

// TaskStats is what the server saw of its tasks, with server-side times.
type TaskStats struct {
	Created, Gets, Results, Cancels int
	// Updates counts tasks/update (2026-07-28); InputResponses lists the
	// inputResponses each carried, as received.
	Updates        int
	InputResponses []json.RawMessage
	// PollTimes lists, per task id, when each tasks/get for it arrived.
	PollTimes map[string][]time.Time
	// CreatedAt is when each task was created.
	CreatedAt map[string]time.Time
}

// The task statuses SetTaskStatus accepts.
const (
	TaskInputRequired = "input_required"
	TaskCancelled     = "cancelled"
)

type taskCtxKey struct{}

// relatedTask is the _meta member naming the task a message belongs to.
const relatedTask = "io.modelcontextprotocol/related-task"

// taskOutcome is what a Handler running as a task set with SetTaskStatus.
type taskOutcome struct {
	status, message string
}

// SetTaskStatus, called by a Handler running as a task, makes the task end
// in status (TaskInputRequired or TaskCancelled) with message instead of
// completed or failed from its result. Outside a task it does nothing.
func SetTaskStatus(ctx context.Context, status, message string) {
	if o, ok := ctx.Value(taskCtxKey{}).(*taskOutcome); ok {
		o.status, o.message = status, message
	}
}

// taskStore holds a server's tasks; the zero value is ready.
type taskStore struct {
	mu      sync.Mutex
	next    int
	tasks   map[string]*task
	expired map[string]bool
	stats   TaskStats
}

type task struct {
	id, session, tool string
	created           time.Time
	ttl               int // ms; 0 = null
	polls             int
	outcome           string          // completed, failed, input_required, cancelled
	message           string          // statusMessage of the outcome
	result            json.RawMessage // CallToolResult, when the handler answered one
	rpcErr            *RPCError       // the handler's JSON-RPC error
	cancelled         bool            // by tasks/cancel
	revealed          bool            // tasks/result asked for the outcome
	answered          int             // input rounds answered by tasks/update (2026-07-28)
}

func init() {
	callTool := requests["tools/call"]
	requests["tools/call"] = func(s *Server, ctx context.Context, sw *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
		if s.opts.Tasks == nil {
			return callTool(s, ctx, sw, in)
		}
		if s.modern() {
			return s.callModern(ctx, sw, in, callTool)
		}
		var p struct {
			Task json.RawMessage `json:"task"`
		}
		_ = json.Unmarshal(in.m.Params, &p)
		if len(p.Task) == 0 || string(p.Task) == "null" {
			if s.taskSupport(in) == "required" {
				return nil, &RPCError{Code: -32601, Message: "tool " + in.tool + " must be called as a task"}
			}
			return callTool(s, ctx, sw, in)
		}
		return s.createTask(ctx, sw, in, p.Task)
	}
	initialize := requests["initialize"]
	requests["initialize"] = func(s *Server, ctx context.Context, sw *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
		res, rpcErr := initialize(s, ctx, sw, in)
		if rpcErr != nil || s.opts.Tasks == nil {
			return res, rpcErr
		}
		var m map[string]any
		if json.Unmarshal(res, &m) != nil {
			return res, nil
		}
		caps, _ := m["capabilities"].(map[string]any)
		if caps == nil {
			caps = map[string]any{}
		}
		caps["tasks"] = map[string]any{"cancel": map[string]any{}, "requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}
		m["capabilities"] = caps
		b, _ := json.Marshal(m)
		return b, nil
	}
	requests["tasks/get"] = (*Server).serveTaskGet
	requests["tasks/result"] = (*Server).serveTaskResult
	requests["tasks/cancel"] = (*Server).serveTaskCancel
}

// taskSupport is the called tool's execution.taskSupport ("" when absent).
func (s *Server) taskSupport(in *inbound) string {
	for _, t := range s.toolsOf(in.sess) {
		if t.Name == in.tool {
			var e struct {
				TaskSupport string `json:"taskSupport"`
			}
			_ = json.Unmarshal(t.Execution, &e)
			return e.TaskSupport
		}
	}
	return ""
}

// createTask runs the tool now and answers a CreateTaskResult.
func (s *Server) createTask(ctx context.Context, sw *streamWriter, in *inbound, params json.RawMessage) (json.RawMessage, *RPCError) {
	var tp struct {
		TTL *int `json:"ttl"`
	}
	if json.Unmarshal(params, &tp) != nil {
		return nil, &RPCError{Code: -32602, Message: "params.task is not an object"}
	}
	if s.taskSupport(in) == "" || s.taskSupport(in) == "forbidden" {
		return nil, &RPCError{Code: -32601, Message: "tool " + in.tool + " does not support tasks"}
	}
	o := &taskOutcome{}
	res, rpcErr := s.call(context.WithValue(ctx, taskCtxKey{}, o), sw, in.sess, in.m, in.r.Header)
	t := &task{session: in.sid, tool: in.tool, created: time.Now(), ttl: s.opts.Tasks.TTL, result: res, rpcErr: rpcErr}
	if tp.TTL != nil {
		t.ttl = *tp.TTL
	}
	switch {
	case o.status != "":
		t.outcome, t.message = o.status, o.message
	case rpcErr != nil:
		t.outcome, t.message = "failed", rpcErr.Message
	case isErrorResult(res) && !s.modern(): // 2026-07-28: completed, with the isError result
		t.outcome, t.message = "failed", "the tool reported an error"
	default:
		t.outcome, t.message = "completed", "completed"
	}
	st := &s.tasks
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.tasks == nil {
		st.tasks, st.expired = map[string]*task{}, map[string]bool{}
		st.stats.PollTimes, st.stats.CreatedAt = map[string][]time.Time{}, map[string]time.Time{}
	}
	st.next++
	t.id = "mcptest-task-" + strconv.Itoa(st.next)
	st.tasks[t.id] = t
	st.stats.Created++
	st.stats.CreatedAt[t.id] = t.created
	if s.modern() {
		obj := s.taskObject(t, "working", "working")
		obj["resultType"] = "task"
		b, _ := json.Marshal(obj)
		return b, nil
	}
	b, _ := json.Marshal(map[string]any{"task": s.taskObject(t, "working", "working")})
	return b, nil
}

func isErrorResult(res json.RawMessage) bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return json.Unmarshal(res, &r) == nil && r.IsError
}

// lookup finds the task params.taskId names for in's session, counting the
// request; it returns the -32602 error a real server gives otherwise.
// The caller holds s.tasks.mu.
func (s *Server) lookup(in *inbound, count func(*TaskStats)) (*task, *RPCError) {
	st := &s.tasks
	count(&st.stats)
	var p struct {
		TaskID string `json:"taskId"`
	}
	_ = json.Unmarshal(in.m.Params, &p)
	t := st.tasks[p.TaskID]
	switch {
	case st.expired[p.TaskID]:
		return nil, &RPCError{Code: -32602, Message: "Failed to retrieve task: Task has expired"}
	case t == nil || (t.session != in.sid && !s.opts.Tasks.Shared):
		return nil, &RPCError{Code: -32602, Message: "Failed to retrieve task: Task not found"}
	}
	return t, nil
}

// status is what the task shows now, and its statusMessage.
func (s *Server) status(t *task) (string, string) {
	switch {
	case t.cancelled:
		return "cancelled", "The task was cancelled by request."
	case (t.revealed || t.polls > s.opts.Tasks.WorkingPolls) && t.answered < s.opts.Tasks.InputRounds && s.modern():
		return TaskInputRequired, "waiting for input"
	case t.revealed || t.polls > s.opts.Tasks.WorkingPolls:
		return t.outcome, t.message
	}
	return "working", "working"
}

func (s *Server) serveTaskGet(_ context.Context, _ *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
	st := &s.tasks
	st.mu.Lock()
	defer st.mu.Unlock()
	t, rpcErr := s.lookup(in, func(ts *TaskStats) { ts.Gets++ })
	if rpcErr != nil {
		return nil, rpcErr
	}
	t.polls++
	st.stats.PollTimes[t.id] = append(st.stats.PollTimes[t.id], time.Now())
	status, msg := s.status(t)
	if f := s.opts.Tasks.StatusMessage; f != nil && status == "working" {
		msg = f(t.polls)
	}
	obj := s.taskObject(t, status, msg)
	if s.modern() {
		s.detail(t, status, obj)
	}
	b, _ := json.Marshal(obj)
	return b, nil
}

func (s *Server) serveTaskResult(_ context.Context, _ *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
	st := &s.tasks
	st.mu.Lock()
	defer st.mu.Unlock()
	if s.modern() {
		return nil, &RPCError{Code: -32601, Message: "method not found: tasks/result (2026-07-28 has none)"}
	}
	t, rpcErr := s.lookup(in, func(ts *TaskStats) { ts.Results++ })
	if rpcErr != nil {
		return nil, rpcErr
	}
	switch {
	case t.cancelled || t.outcome == TaskCancelled:
		return nil, &RPCError{Code: -32603, Message: "task was cancelled"}
	case t.outcome == TaskInputRequired:
		return nil, &RPCError{Code: -32600, Message: "task awaits input: mcptest offers no elicitation"}
	}
	t.revealed = true // a real server blocks until the outcome; ours is ready
	if t.rpcErr != nil {
		return nil, t.rpcErr
	}
	var m map[string]any
	if json.Unmarshal(t.result, &m) != nil {
		return t.result, nil // a Result.Raw the test wants verbatim
	}
	meta, _ := m["_meta"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	if _, ok := meta[relatedTask]; !ok { // a handler may name another task, as a broken server would
		meta[relatedTask] = map[string]any{"taskId": t.id}
	}
	m["_meta"] = meta
	b, _ := json.Marshal(m)
	return b, nil
}

func (s *Server) serveTaskCancel(_ context.Context, _ *streamWriter, in *inbound) (json.RawMessage, *RPCError) {
	st := &s.tasks
	st.mu.Lock()
	defer st.mu.Unlock()
	t, rpcErr := s.lookup(in, func(ts *TaskStats) { ts.Cancels++ })
	if rpcErr != nil {
		return nil, rpcErr
	}
	if status, _ := s.status(t); status == "completed" || status == "failed" || status == "cancelled" {
		if s.modern() { // acknowledged: cancellation is cooperative
			return json.RawMessage(`{"resultType":"complete"}`), nil
		}
		return nil, &RPCError{Code: -32602, Message: "Cannot cancel task in terminal status: " + status}
	}
	t.cancelled = true
	if s.modern() {
		return json.RawMessage(`{"resultType":"complete"}`), nil
	}
	status, msg := s.status(t)
	b, _ := json.Marshal(s.taskObject(t, status, msg))
	return b, nil
}

// taskObject renders a task as the wire's Task.
func (s *Server) taskObject(t *task, status, message string) map[string]any {
	m := map[string]any{
		"taskId": t.id, "status": status, "statusMessage": message,
		"createdAt": t.created.UTC().Format(time.RFC3339Nano), "lastUpdatedAt": time.Now().UTC().Format(time.RFC3339Nano),
	}
	ttl, poll := "ttl", "pollInterval"
	if s.modern() {
		ttl, poll = "ttlMs", "pollIntervalMs"
	}
	m[ttl] = nil
	if t.ttl > 0 {
		m[ttl] = t.ttl
	}
	switch {
	case s.opts.Tasks.RawPollInterval != nil:
		m[poll] = s.opts.Tasks.RawPollInterval
	case s.opts.Tasks.PollInterval > 0:
		m[poll] = s.opts.Tasks.PollInterval
	}
	return m
}

// ExpireTasks forgets every task, as a server does once a task's ttl has
// passed: tasks/get, tasks/result and tasks/cancel then answer -32602
// "Task has expired".
func (s *Server) ExpireTasks() {
	st := &s.tasks
	st.mu.Lock()
	defer st.mu.Unlock()
	for id := range st.tasks {
		st.expired[id] = true
	}
	clear(st.tasks)
}

// TaskStats returns what the server saw of its tasks.
func (s *Server) TaskStats() TaskStats {
	st := &s.tasks
	st.mu.Lock()
	defer st.mu.Unlock()
	out := st.stats
	out.PollTimes = map[string][]time.Time{}
	for id, ts := range st.stats.PollTimes {
		out.PollTimes[id] = slices.Clone(ts)
	}
	out.CreatedAt = maps.Clone(st.stats.CreatedAt)
	return out
}
