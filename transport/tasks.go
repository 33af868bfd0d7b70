package transport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// MCP tasks (2025-11-25, experimental): a tools/call sent with params.task
// is answered at once with a CreateTaskResult; the task is then asked about
// with tasks/get, its outcome fetched with tasks/result, and it may be
// cancelled with tasks/cancel. Each of these is an ordinary request of the
// session: every frame reaches the sink, and failures are *Error values.
// Asking about a task is never a resend of the call; what a failure of
// tasks/get means for the call (poll again, task lost) is the caller's
// decision (package fsm), helped by TaskLost and PollAgain.

// The JSON-RPC names this file speaks.
const (
	methodTasksGet         = "tasks/get"
	methodTasksResult      = "tasks/result"
	methodTasksCancel      = "tasks/cancel"
	methodToolsListChanged = "notifications/tools/list_changed"
)

// JSON-RPC error codes with a meaning for tasks.
const (
	// CodeInvalidParams answers tasks/get or tasks/result for a task id the
	// server does not know or has expired (and tasks/cancel of a task
	// already terminal).
	CodeInvalidParams = -32602
	// CodeURLElicitationRequired: the server needs a person to visit a URL
	// before the request can proceed (2025-11-25).
	CodeURLElicitationRequired = -32042
)

// Polling bounds: a server's pollInterval is honoured within them.
const (
	defaultPollInterval = time.Second // when the server suggests none
	minPollInterval     = 10 * time.Millisecond
	defaultMaxPoll      = 30 * time.Second // Config.MaxPollInterval 0
	maxTaskIDBytes      = 1024
)

// TaskStatus is a task's status as the server reports it.
type TaskStatus string

// The task statuses of MCP 2025-11-25.
const (
	TaskWorking       TaskStatus = "working"
	TaskInputRequired TaskStatus = "input_required"
	TaskCompleted     TaskStatus = "completed"
	TaskFailed        TaskStatus = "failed"
	TaskCancelled     TaskStatus = "cancelled"
)

// Terminal reports whether the server will never change the status again,
// so polling can stop and tasks/result answers at once.
func (s TaskStatus) Terminal() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

func (s TaskStatus) valid() bool {
	return s == TaskWorking || s == TaskInputRequired || s.Terminal()
}

// Task is the server's view of one task (CreateTaskResult.task, and the
// result of tasks/get and tasks/cancel). Remote text is data, redacted.
type Task struct {
	// ID is the server's task id as sent: what tasks/get, tasks/result and
	// tasks/cancel must name. It is remote text that may hold a secret:
	// keep or print RedactedID instead.
	ID string
	// RedactedID is ID with every secret value scrubbed, as any remote
	// string agentctl keeps or prints (ID itself unless it holds one).
	RedactedID    string
	Status        TaskStatus
	StatusMessage string
	CreatedAt     string
	LastUpdatedAt string
	// TTL is how long the server keeps the task from its creation; 0 when
	// unlimited (null) or not said.
	TTL time.Duration
	// PollInterval is the server's suggested delay between polls; 0 when
	// not said (PollTask then waits 1s).
	PollInterval time.Duration
	Raw          json.RawMessage // the task object as received (redacted)

	// At 2026-07-28 (tasks2026.go) tasks/get carries the outcome inline:
	// Result is a completed task's result as received (read it with
	// TaskOutcome, which also reads a failed task's JSON-RPC error), Input
	// an input_required task's input requests (answered with UpdateTask).
	Result  json.RawMessage
	Input   *InputRequired
	failure *rpcError
}

// TaskIDDigest returns "sha256:<hex>" of a task id, for showing a long or
// odd id to a human without printing remote text.
func TaskIDDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TaskSupport is a tool's execution.taskSupport: whether it may, must or
// must not be called as a task.
type TaskSupport string

// The values of execution.taskSupport; absent or unknown means forbidden.
const (
	TaskSupportForbidden TaskSupport = "forbidden"
	TaskSupportOptional  TaskSupport = "optional"
	TaskSupportRequired  TaskSupport = "required"
)

// TaskSupport reads the tool's execution.taskSupport, so the caller can
// refuse a required tool before sending anything when the server does not
// advertise tasks; absent, unknown or malformed is forbidden.
func (t Tool) TaskSupport() TaskSupport {
	var e struct {
		TaskSupport TaskSupport `json:"taskSupport"`
	}
	if ex := t.execution(); !present(ex) || strictUnmarshal(ex, &e) != nil {
		return TaskSupportForbidden
	}
	switch e.TaskSupport {
	case TaskSupportOptional, TaskSupportRequired:
		return e.TaskSupport
	}
	return TaskSupportForbidden
}

// ToolCallTasks reports whether the server's initialize result advertises
// task-augmented tools/call (capabilities.tasks.requests.tools.call); a
// client must not send params.task otherwise.
func (s *Session) ToolCallTasks() bool {
	var caps struct {
		Tasks *struct {
			Requests *struct {
				Tools *struct {
					Call json.RawMessage `json:"call"`
				} `json:"tools"`
			} `json:"requests"`
		} `json:"tasks"`
	}
	if strictUnmarshal(s.Capabilities, &caps) != nil || caps.Tasks == nil || caps.Tasks.Requests == nil ||
		caps.Tasks.Requests.Tools == nil {
		return false
	}
	c := caps.Tasks.Requests.Tools.Call
	return len(c) > 0 && c[0] == '{'
}

// ToolsChanged reports whether notifications/tools/list_changed arrived on
// any stream of this session since ListTools last started, so the caller
// re-lists and compares the tool's digest before its next call.
func (s *Session) ToolsChanged() bool { return s.toolsChanged.Load() }

// SessionID returns the raw MCP-Session-Id so that the caller can persist
// it, sealed, and Reattach after a restart to poll a task the server keeps
// per session. It is a bearer credential: never print or store it in clear
// (IDDigest is for display). "" when the server issued none.
func (s *Session) SessionID() string { return s.sessionID }

// Reattach returns a session bound to a recorded MCP-Session-Id without a
// new initialize, to poll a task after a restart. Nothing is sent until the
// first request; a 404 then is KindSessionExpired, meaning the task is lost
// (TaskLost). Close ends the server's session as usual.
func (c *Client) Reattach(sessionID string) (*Session, error) {
	if sessionID == "" || !visibleASCII(sessionID) {
		return nil, &Error{Op: "reattach", Kind: KindMalformed, Message: "recorded session id is empty or not visible ASCII"}
	}
	return c.hold(&Session{c: c, sessionID: sessionID, ProtocolVersion: ProtocolVersion}), nil
}

// TaskCall is the answer to a task-augmented tools/call: Task when the
// server created a task, or Result when it answered the call directly
// (a server may ignore params.task).
type TaskCall struct {
	Task   *Task
	Result *CallResult
	ID     json.RawMessage // JSON-RPC id of the tools/call
}

// CallToolTask sends tools/call with params.task {ttl} (ttl in
// milliseconds; 0 omits it, leaving the server's default) and returns the
// CreateTaskResult's task. The caller must persist the task id before
// anything else: from then on the call is asked about, never resent.
// Failures classify like CallTool's.
func (s *Session) CallToolTask(ctx context.Context, req CallRequest, ttl time.Duration, sink Sink) (*TaskCall, error) {
	params, id, err := s.callParams(req)
	if err != nil {
		return nil, err
	}
	task := map[string]any{}
	if ttl > 0 {
		task["ttl"] = ttl.Milliseconds()
	}
	params["task"] = task
	m, err := s.roundTrip(ctx, "tools/call", params, sink, id)
	if err != nil {
		return nil, err
	}
	var res struct {
		Task json.RawMessage `json:"task"`
	}
	if err := strictUnmarshal(m.Result, &res); err != nil || m.Result[0] != '{' {
		return nil, &Error{Op: "tools/call", Kind: KindMalformed, Sent: true, Message: "result is not a CreateTaskResult or CallToolResult object"}
	}
	if !present(res.Task) {
		r, err := s.callResult("tools/call", m.Result, id)
		if err != nil {
			return nil, err
		}
		return &TaskCall{Result: r, ID: id}, nil
	}
	t, err := s.parseTask("tools/call", res.Task, "")
	if err != nil {
		return nil, err
	}
	return &TaskCall{Task: t, ID: id}, nil
}

// GetTask sends tasks/get for taskID. An unknown or expired task is a
// KindRemoteError with Code -32602 (TaskLost reports it).
func (s *Session) GetTask(ctx context.Context, taskID string, sink Sink) (*Task, error) {
	m, err := s.roundTrip(ctx, methodTasksGet, map[string]any{"taskId": taskID}, sink, s.newID())
	if err != nil {
		return nil, err
	}
	return s.parseTask(methodTasksGet, m.Result, taskID)
}

// CancelTask sends tasks/cancel for taskID and returns the task as the
// server then reports it (status cancelled when it confirms). A task
// already terminal is refused with -32602: ask tasks/get for its status.
//
// At 2026-07-28 the server only acknowledges (cancellation is cooperative):
// the task returned is nil, and tasks/get tells what became of it.
func (s *Session) CancelTask(ctx context.Context, taskID string, sink Sink) (*Task, error) {
	m, err := s.roundTrip(ctx, methodTasksCancel, map[string]any{"taskId": taskID}, sink, s.newID())
	if err != nil || s.stateless() {
		return nil, err
	}
	return s.parseTask(methodTasksCancel, m.Result, taskID)
}

// TaskResult sends tasks/result for taskID and returns the tool's result
// exactly as a direct tools/call would have (validate it the same way). A
// JSON-RPC error is the underlying call's error, except -32602, which says
// the task is unknown or expired (TaskLost). It blocks on the server until
// the task is terminal: call it once tasks/get said completed or failed.
//
// A result whose _meta "io.modelcontextprotocol/related-task" names
// another task (or is not an object with a string taskId) belongs to no
// question asked: it is KindMalformed, like any answer that breaks the
// protocol after the task may have run.
func (s *Session) TaskResult(ctx context.Context, taskID string, sink Sink) (*CallResult, error) {
	id := s.newID()
	m, err := s.roundTrip(ctx, methodTasksResult, map[string]any{"taskId": taskID}, sink, id)
	if err != nil {
		return nil, err
	}
	res, err := s.callResult(methodTasksResult, m.Result, id)
	if err != nil {
		return nil, err
	}
	if err := relatedTask(m.Result, taskID); err != nil {
		return nil, err
	}
	return res, nil
}

// RelatedTaskKey is the _meta member by which a task's messages name
// their task (MCP 2025-11-25).
const RelatedTaskKey = "io.modelcontextprotocol/related-task"

// relatedTask checks the related-task _meta of a tasks/result answer
// about want: absent is accepted (the request already names the task);
// present, it must name want.
func relatedTask(result json.RawMessage, want string) error {
	var r struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	if json.Unmarshal(result, &r) != nil {
		return nil // callResult already checked the object
	}
	raw, ok := r.Meta[RelatedTaskKey]
	if !ok {
		return nil
	}
	var rt struct {
		TaskID *string `json:"taskId"`
	}
	bad := func(msg string) error {
		return &Error{Op: methodTasksResult, Kind: KindMalformed, Sent: true,
			Err: fmt.Errorf("%w: result _meta %q %s", errMalformed, RelatedTaskKey, msg)}
	}
	switch {
	case strictUnmarshal(raw, &rt) != nil || len(raw) == 0 || raw[0] != '{' || rt.TaskID == nil:
		return bad("is not an object with a string taskId")
	case *rt.TaskID != want:
		return bad(fmt.Sprintf("names task %s, not the task asked about (%s)", TaskIDDigest(*rt.TaskID), TaskIDDigest(want)))
	}
	return nil
}

// PollTask waits the task's pollInterval (1s when the server gave none,
// within [10ms, Config.MaxPollInterval]) and asks tasks/get, again and
// again, until the status is no longer working. observe, when not nil, sees
// every answer in order before the next wait (to record a status change;
// an error from it stops polling). The last task is returned; a failure of
// tasks/get is returned as is, and the caller decides (PollAgain, TaskLost).
func (s *Session) PollTask(ctx context.Context, t *Task, sink Sink, observe func(*Task) error) (*Task, error) {
	for t.Status == TaskWorking {
		if err := s.waitPoll(ctx, t.PollInterval); err != nil {
			return t, err
		}
		next, err := s.GetTask(ctx, t.ID, sink)
		if err != nil {
			return t, err
		}
		if observe != nil {
			if err := observe(next); err != nil {
				return next, err
			}
		}
		t = next
	}
	return t, nil
}

// waitPoll sleeps the bounded poll interval or until ctx ends.
func (s *Session) waitPoll(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		d = defaultPollInterval
	}
	maxD := s.c.cfg.MaxPollInterval
	if maxD <= 0 {
		maxD = defaultMaxPoll
	}
	d = min(max(d, minPollInterval), maxD)
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return &Error{Op: methodTasksGet, Kind: ctxKind(ctx.Err()), Err: ctx.Err()}
	}
}

// wireTask is a Task as sent: TTL may be null (unlimited).
type wireTask struct {
	TaskID        *string    `json:"taskId"`
	Status        TaskStatus `json:"status"`
	StatusMessage string     `json:"statusMessage"`
	CreatedAt     string     `json:"createdAt"`
	LastUpdatedAt string     `json:"lastUpdatedAt"`
	TTL           *float64   `json:"ttl"`
	TTLMs         *float64   `json:"ttlMs"` // 2026-07-28
	// PollInterval is read leniently (pollMillis): a malformed suggestion
	// is ignored, not a reason to throw the task away.
	PollInterval   json.RawMessage `json:"pollInterval"`
	PollIntervalMs json.RawMessage `json:"pollIntervalMs"` // 2026-07-28
	Meta           json.RawMessage `json:"_meta"`
}

// parseTask reads a task object; want, when not "", is the id asked about.
func (s *Session) parseTask(op string, raw json.RawMessage, want string) (*Task, error) {
	bad := func(format string, args ...any) error {
		return &Error{Op: op, Kind: KindMalformed, Sent: true, Err: fmt.Errorf("%w: task: %s", errMalformed, fmt.Sprintf(format, args...))}
	}
	var w wireTask
	if err := strictUnmarshal(raw, &w); err != nil || raw[0] != '{' {
		return nil, bad("not a task object")
	}
	switch {
	case w.TaskID == nil || *w.TaskID == "":
		return nil, bad("no taskId")
	case len(*w.TaskID) > maxTaskIDBytes:
		return nil, bad("taskId longer than %d bytes", maxTaskIDBytes)
	case want != "" && *w.TaskID != want:
		return nil, bad("taskId %s answers a question about %s", TaskIDDigest(*w.TaskID), TaskIDDigest(want))
	case !w.Status.valid():
		return nil, bad("unknown status %q", truncate(string(w.Status), 64))
	}
	red := s.c.red
	ttl, poll := w.TTL, w.PollInterval
	if s.stateless() {
		ttl, poll = w.TTLMs, w.PollIntervalMs
	}
	t := &Task{ID: *w.TaskID, RedactedID: red.string(*w.TaskID), Status: w.Status, StatusMessage: red.cut(w.StatusMessage, 1024),
		CreatedAt: truncate(w.CreatedAt, 64), LastUpdatedAt: truncate(w.LastUpdatedAt, 64),
		TTL: millis(ttl), PollInterval: pollMillis(poll), Raw: red.json(raw)}
	if s.stateless() {
		if err := s.detail(op, raw, t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// pollMillis reads a task's pollInterval: a number of milliseconds, or 0
// (PollTask's default interval) when absent, null or malformed (a string,
// an object, a negative or absurd number). It is a suggestion: a server
// that spells it badly still answered a valid task.
func pollMillis(raw json.RawMessage) time.Duration {
	var v float64
	if !present(raw) || json.Unmarshal(raw, &v) != nil {
		return 0
	}
	return millis(&v)
}

// millis turns a count of milliseconds into a Duration; absent, null,
// negative or absurd values are 0.
func millis(v *float64) time.Duration {
	if v == nil || *v <= 0 || *v > float64(365*24*time.Hour/time.Millisecond) {
		return 0
	}
	return time.Duration(*v * float64(time.Millisecond))
}

// TaskLost reports whether err, from GetTask or TaskResult, says the server
// no longer knows the task: JSON-RPC -32602 (unknown or expired task id) or
// a 404 for the session the task lives in. The task may have run: for the
// call this is ambiguous (fsm.TaskLost), not a reason to poll again.
func TaskLost(err error) bool {
	var e *Error
	if !errors.As(err, &e) || (e.Op != methodTasksGet && e.Op != methodTasksResult) {
		return false
	}
	return e.Kind == KindSessionExpired || (e.Kind == KindRemoteError && e.Code == CodeInvalidParams)
}

// PollAgain reports whether err, from GetTask or TaskResult, leaves the
// task's fate unknown but askable: a timeout, a lost stream or connection,
// a malformed answer or a 5xx. Asking again is not a resend (fsm:
// FailAmbiguous → polling); a caller bounds how long it keeps asking.
func PollAgain(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return false
	}
	switch e.Kind {
	case KindTimeout, KindTransportLoss, KindMalformed:
		return true
	case KindHTTPStatus:
		return e.Status >= 500
	}
	return false
}
