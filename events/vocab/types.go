// Package vocab is the log's vocabulary: every event type as a named
// constant and its payload as a Go struct, one generic decode (Decode,
// sealed payloads opened inside it) and one dispatch by type (Payload).
// Every reader of the log (projector, replay, resume, report, progress,
// metrics, describe) decodes payloads here and nowhere else
// (TestNoHandDecodeOutsideVocab).
package vocab

import "encoding/json"

// Event types of the log. Frame events are "mcp." + the transport frame kind.
const (
	TypeRunCreated      = "run.created"
	TypeRunFinished     = "run.finished"
	TypeRunStarted      = "run.started"
	TypeTaskStarted     = "task.started"
	TypeTaskFinished    = "task.finished"
	TypeTaskSkipped     = "task.skipped"
	TypeTaskRetry       = "task.retry_scheduled"
	TypeSessionOpened   = "session.opened"
	TypeSessionCatalog  = "session.catalog"
	TypeSessionExpired  = "session.expired"
	TypeSessionAttached = "session.attached"
	TypeCallPrepared    = "call.prepared"
	TypeCallTransition  = "call.transition"
	TypeCallResult      = "call.result"
	TypeCallError       = "call.error"
	TypeCallReconciled  = "call.reconciled"
	TypeReplayFrames    = "replay.frames"
	TypeAuthStep        = "auth.step"
	FramePrefix         = "mcp."
)

// RunCreated opens a run: the workflow source is kept whole so that replay
// needs nothing but the log.
type RunCreated struct {
	RunID       string            `json:"runId"`
	Workflow    string            `json:"workflow"`
	File        string            `json:"file"`
	Digest      string            `json:"digest"`
	Source      string            `json:"source"`
	Inputs      map[string]any    `json:"inputs"`
	Mode        string            `json:"mode"`
	SourceRunID string            `json:"sourceRunId,omitempty"`
	Servers     map[string]string `json:"servers,omitempty"`
	Command     string            `json:"command,omitempty"`
	// Queued marks a run recorded by `submit`: nothing runs until a worker
	// claims it with run.started (seq 2, compare-and-append after seq 1).
	Queued bool `json:"queued,omitempty"`
	// TraceParent and TraceState are the W3C trace context the run was
	// started under (the TRACEPARENT and TRACESTATE variables): its
	// telemetry is a child of that trace, on resume too.
	TraceParent string `json:"traceParent,omitempty"`
	TraceState  string `json:"traceState,omitempty"`
}

// RunStarted is a worker's claim of a queued run: the first event after
// run.created, appended only if the log still ends at run.created.
type RunStarted struct {
	Worker  string `json:"worker"` // host/pid of the claiming process
	Command string `json:"command,omitempty"`
}

// RunFinished closes a run with its outcome.
type RunFinished struct {
	State    string         `json:"state"`
	Outputs  map[string]any `json:"outputs,omitempty"`
	Error    string         `json:"error,omitempty"`
	ExitCode int            `json:"exitCode"`
}

// TaskStarted opens one task attempt.
type TaskStarted struct {
	TaskID      string `json:"taskId"`
	Attempt     int    `json:"attempt"`
	Server      string `json:"server"`
	Tool        string `json:"tool"`
	Action      string `json:"action"`
	Idempotency string `json:"idempotency"`
}

// TaskFinished closes one task attempt.
type TaskFinished struct {
	TaskID  string          `json:"taskId"`
	Attempt int             `json:"attempt"`
	State   string          `json:"state"`
	Output  json.RawMessage `json:"output,omitempty"`
	// OutputOfCall: Output was left out because it is the output of the
	// attempt's call (its call.result's); Outputs restores it. Absent in
	// logs written before outputs were stored once.
	OutputOfCall bool   `json:"outputOfCall,omitempty"`
	Error        string `json:"error,omitempty"`
	// ErrorKind is the transport error kind of Error, when it is one (a
	// replay rebuilds a failed session open from it); absent before it
	// was recorded.
	ErrorKind string `json:"errorKind,omitempty"`
}

// TaskSkipped records a task that never started because the run stopped
// (a task failed or ended uncertain, or the run was cancelled). Attempt is
// the attempt it would have started.
type TaskSkipped struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
}

// TaskRetryScheduled records that a task attempt failed definitively and
// the next attempt starts at NotBefore (RFC 3339, UTC): a process that
// dies during the wait resumes the same wait.
type TaskRetryScheduled struct {
	TaskID    string `json:"taskId"`
	Attempt   int    `json:"attempt"` // the attempt that will start
	NotBefore string `json:"notBefore"`
	Reason    string `json:"reason,omitempty"`
}

// SessionOpened records an initialized MCP session.
type SessionOpened struct {
	Remote          string          `json:"remote"`
	URL             string          `json:"url"`
	Generation      int             `json:"generation"`
	TaskID          string          `json:"taskId"`
	ProtocolVersion string          `json:"protocolVersion"`
	ServerInfo      json.RawMessage `json:"serverInfo,omitempty"`
	SessionIDDigest string          `json:"sessionIdDigest,omitempty"`
	SourceRunID     string          `json:"sourceRunId,omitempty"`
	SourceTaskID    string          `json:"sourceTaskId,omitempty"`
	// TaskPoll: resume opened this session only to ask about an MCP task
	// accepted on an earlier one whose id was not kept (encryption off); a
	// replay, never interrupted, does not open it.
	TaskPoll bool `json:"taskPoll,omitempty"`
	// BorrowedFrom: the run did not open this session but borrowed it from
	// its worker's pool (workflow.SessionPool): no initialize frames are
	// in this run; the session.catalog that follows is a copy of the
	// catalog the session was listed with (or, past a 2026-07-28 ttlMs,
	// listed again, its frames in this run). Generation is this run's.
	BorrowedFrom *SessionOrigin `json:"borrowedFrom,omitempty"`
}

// SessionOrigin names where a borrowed session was opened: the run that
// initialized it and its generation there, plus what that run's
// initialize frames said which this run's log must keep on its own.
type SessionOrigin struct {
	RunID      string `json:"runId"`
	Generation int    `json:"generation"`
	// ToolCallTasks: initialize advertised task-augmented tools/call
	// (2025-11-25), read by a replay of this run from here.
	ToolCallTasks bool `json:"toolCallTasks,omitempty"`
}

// ToolInfo is one tool of a catalog as recorded (remote text is data only).
type ToolInfo struct {
	Name         string          `json:"name"`
	Digest       string          `json:"digest"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	Execution    json.RawMessage `json:"execution,omitempty"`
}

// SessionCatalog records the tools/list result of a session. Every tool is
// listed with its digest; since session 20 only the tools the run's tasks
// call on the remote (every tool, for a listing run) keep their schemas,
// annotations and execution: the others' are in the tools/list response
// frames, and their digests still hash to CatalogDigest.
type SessionCatalog struct {
	Remote        string     `json:"remote"`
	Generation    int        `json:"generation"`
	TaskID        string     `json:"taskId"`
	CatalogDigest string     `json:"catalogDigest"`
	Tools         []ToolInfo `json:"tools"`
	Warnings      []string   `json:"warnings,omitempty"`
}

// SessionRef names a session row (expired, or attached to another task).
type SessionRef struct {
	Remote     string `json:"remote"`
	Generation int    `json:"generation"`
	TaskID     string `json:"taskId"`
	FromTaskID string `json:"fromTaskId,omitempty"`
}

// CallPrepared fixes a call's identity before anything is sent.
type CallPrepared struct {
	EffectID        string          `json:"effectId"`
	TaskID          string          `json:"taskId"`
	Attempt         int             `json:"attempt"`
	Ordinal         int             `json:"ordinal"`
	Server          string          `json:"server"`
	Tool            string          `json:"tool"`
	Idempotency     string          `json:"idempotency"`
	Generation      int             `json:"generation"`
	ArgumentsDigest string          `json:"argumentsDigest"`
	SchemaDigest    string          `json:"schemaDigest"`
	Arguments       json.RawMessage `json:"arguments"`
	IdempotencyKey  string          `json:"idempotencyKey,omitempty"`
	SourceRunID     string          `json:"sourceRunId,omitempty"`
	SourceEffectID  string          `json:"sourceEffectId,omitempty"`
	// State is the call's first state ("prepared"); absent in logs
	// written before moves were recorded in facts.
	State string `json:"state,omitempty"`
	// SessionFrom is the task whose session (Server, Generation) this
	// call's task uses without having opened it: what session.attached
	// recorded before.
	SessionFrom string `json:"sessionFrom,omitempty"`
}

// Move is a call's state change recorded in the fact that caused it (the
// request frame, call.error, call.result, call.reconciled, the task
// events): the state the machine moved the call to, by which trigger and
// why, with the session generation and redispatch count after it. The
// state it moved from is the one before (call.prepared's, then each
// move's To); the machine must give To for Trigger from there, else the
// log is corrupt.
type Move struct {
	To           string `json:"to"`
	Trigger      string `json:"trigger"`
	Reason       string `json:"reason,omitempty"`
	Generation   int    `json:"generation"`
	Redispatches int    `json:"redispatches,omitempty"`
}

// CallTransition is one move of the call state machine, as a log written
// before moves rode on facts recorded it (it is no longer written when a
// fact carries the move).
type CallTransition struct {
	EffectID     string `json:"effectId"`
	From         string `json:"from"`
	To           string `json:"to"`
	Trigger      string `json:"trigger"`
	Reason       string `json:"reason,omitempty"`
	Generation   int    `json:"generation"`
	Redispatches int    `json:"redispatches"`
}

// CallResult records a complete, validated tools/call result.
type CallResult struct {
	EffectID     string          `json:"effectId"`
	JSONRPCID    json.RawMessage `json:"jsonRpcId,omitempty"`
	IsError      bool            `json:"isError"`
	ResultDigest string          `json:"resultDigest"`
	Output       json.RawMessage `json:"output,omitempty"`
	// OutputInResponse: Output was left out because the call's response
	// frame holds it exactly (FrameOutput); Outputs restores it. Absent in
	// logs written before outputs were stored once.
	OutputInResponse bool `json:"outputInResponse,omitempty"`
	// Structured reports that Output is structuredContent (not content), so
	// a resumed run can validate a recorded result without the network.
	Structured bool `json:"structured,omitempty"`
	// ViaTask: the result came from tasks/result after Polls tasks/get.
	ViaTask bool `json:"viaTask,omitempty"`
	Polls   int  `json:"polls,omitempty"`
	// Received is the outputSchema verdict on structuredContent as the
	// server sent it, recorded when redaction changed what Output holds:
	// a resumed or replayed run concludes on it, since validating the
	// redacted Output could decide otherwise.
	Received *OutputCheck `json:"received,omitempty"`
	Move     *Move        `json:"move,omitempty"`
}

// OutputCheck is an outputSchema verdict: Kind is empty when the value is
// valid, else the failure's kind and its (redacted) message.
type OutputCheck struct {
	Kind    string `json:"kind,omitempty"`
	Message string `json:"message,omitempty"`
}

// CallError records why an attempt to send or complete a call failed.
type CallError struct {
	EffectID string `json:"effectId"`
	Kind     string `json:"kind"`
	Message  string `json:"message"`
	Status   int    `json:"status,omitempty"`
	Code     int    `json:"code,omitempty"`
	Move     *Move  `json:"move,omitempty"`
}

// CallReconciled is an operator's verdict on an uncertain call.
type CallReconciled struct {
	EffectID     string          `json:"effectId"`
	Status       string          `json:"status"`
	Reason       string          `json:"reason"`
	ResultDigest string          `json:"resultDigest,omitempty"`
	Result       json.RawMessage `json:"result,omitempty"`
	Move         *Move           `json:"move,omitempty"`
}

// ReplayFrames stands, in a replay run, for recorded frames the replay
// answered with: they stay in the run that recorded them (SourceRunID; a
// replay of a replay names the run that has the frames themselves), listed
// as inclusive seq spans of frame events only, and bound to that run's hash
// chain by the hash of the last one. Where they go in the replay (remote,
// generation, task, attempt, the replay's effect id) is as in a Frame.
// Evidence is referenced, not copied, so a replay writes its decisions and
// not the evidence again (docs/ARCHITECTURE.md, "Replay").
type ReplayFrames struct {
	Remote      string     `json:"remote"`
	Generation  int        `json:"generation"`
	TaskID      string     `json:"taskId,omitempty"`
	Attempt     int        `json:"attempt,omitempty"`
	EffectID    string     `json:"effectId,omitempty"`
	SourceRunID string     `json:"sourceRunId"`
	Spans       [][2]int64 `json:"spans"`
	Count       int64      `json:"count"`
	LastHash    string     `json:"lastHash"`
	Move        *Move      `json:"move,omitempty"`
}

// Frame is one protocol message as persisted.
type Frame struct {
	Dir        string          `json:"dir"`
	Kind       string          `json:"kind"`
	Method     string          `json:"method,omitempty"`
	ID         json.RawMessage `json:"id,omitempty"`
	HTTPStatus int             `json:"httpStatus,omitempty"`
	EventID    string          `json:"eventId,omitempty"`
	Remote     string          `json:"remote"`
	Generation int             `json:"generation"`
	TaskID     string          `json:"taskId,omitempty"`
	Attempt    int             `json:"attempt,omitempty"`
	EffectID   string          `json:"effectId,omitempty"`
	Move       *Move           `json:"move,omitempty"`
	Body       json.RawMessage `json:"body"`
}

// MCP task events (issue 16). All are call.* (or session.*) events, so the
// encryption codec seals them whole.
const (
	TypeCallTaskAccepted  = "call.task_accepted"
	TypeCallTaskStatus    = "call.task_status"
	TypeCallTaskCancel    = "call.task_cancel"
	TypeSessionReattached = "session.reattached"
)

// CallTaskAccepted records the CreateTaskResult of a task-augmented
// tools/call, committed with its response frame before the first tasks/get:
// from here on the call is asked about, never resent. SessionID is the raw
// MCP-Session-Id needed to reattach after a restart: a bearer credential,
// written only when the database seals payloads (encryption on); in clear
// only SessionIDDigest is kept, and resume asks about the task on a new
// session. TaskID is the server's id redacted like any remote string
// (TaskIDDigest is the digest of that form).
type CallTaskAccepted struct {
	EffectID        string          `json:"effectId"`
	TaskID          string          `json:"taskId"`
	TaskIDDigest    string          `json:"taskIdDigest"`
	SessionID       string          `json:"sessionId,omitempty"`
	SessionIDDigest string          `json:"sessionIdDigest,omitempty"`
	Remote          string          `json:"remote"`
	Generation      int             `json:"generation"`
	Status          string          `json:"status"`
	StatusMessage   string          `json:"statusMessage,omitempty"`
	TTLMs           int64           `json:"ttlMs,omitempty"`
	PollIntervalMs  int64           `json:"pollIntervalMs,omitempty"`
	JSONRPCID       json.RawMessage `json:"jsonRpcId,omitempty"`
	Move            *Move           `json:"move,omitempty"`
}

// CallTaskStatus is a change of the task's (status, statusMessage) seen by
// tasks/get; identical answers are folded: Poll is the ordinal of the poll
// that first showed it, so the polls it stands for are the next event's
// Poll minus this one. A call records a bounded number of changes (count
// and text): Folded is how many changes before this one were seen but not
// recorded because the bound was reached, and FramesOmitted says the
// poll's frames were not kept (the call's poll frames reached their bound).
type CallTaskStatus struct {
	EffectID      string `json:"effectId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	Poll          int    `json:"poll"`
	Folded        int    `json:"folded,omitempty"`
	FramesOmitted bool   `json:"framesOmitted,omitempty"`
	Move          *Move  `json:"move,omitempty"`
}

// CallTaskCancel records a tasks/cancel (cause "user", "timeout": a
// deadline bounding the task call, or "input_required") and what the
// server answered.
type CallTaskCancel struct {
	EffectID  string `json:"effectId"`
	Cause     string `json:"cause"`
	Confirmed bool   `json:"confirmed"`
	Status    string `json:"status,omitempty"`
	Error     string `json:"error,omitempty"`
	Move      *Move  `json:"move,omitempty"`
}

// SessionReattached records that a resumed run bound a recorded session
// (no initialize, no tools/list) to poll a task.
type SessionReattached struct {
	Remote          string `json:"remote"`
	Generation      int    `json:"generation"`
	SessionIDDigest string `json:"sessionIdDigest,omitempty"`
	TaskIDDigest    string `json:"taskIdDigest"`
	TaskID          string `json:"taskId,omitempty"` // the workflow task
}

// AuthStep is one step of a remote's OAuth authorization (issue 31):
// discovery, registration, a token obtained or refreshed, a step-up. It
// carries no secret: no token, code, verifier, state or client secret,
// and URLs without their query.
type AuthStep struct {
	Remote   string   `json:"remote"`
	Kind     string   `json:"kind"`
	Issuer   string   `json:"issuer,omitempty"`
	Resource string   `json:"resource,omitempty"`
	ClientID string   `json:"clientId,omitempty"`
	Scopes   []string `json:"scopes,omitempty"`
	URL      string   `json:"url,omitempty"`
	Method   string   `json:"method,omitempty"`
	Detail   string   `json:"detail,omitempty"`
}

// TypeRunResumed marks where `agentctl resume` picked a run up again: the
// same run id, the seq continuing. Everything before it still stands;
// everything after it is the resumed process.
const TypeRunResumed = "run.resumed"

// RunResumed is the payload of run.resumed.
type RunResumed struct {
	// FromSeq is the last seq the resumed process found in the log.
	FromSeq int64 `json:"fromSeq"`
	// PreviousState is the run's state before the resume: "running" after
	// a crash, or "uncertain" when a reconcile made a finished run resumable.
	PreviousState string `json:"previousState"`
	// Command names what resumed the run ("resume").
	Command string `json:"command,omitempty"`
}
