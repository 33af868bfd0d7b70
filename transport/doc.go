// Package transport is agentctl's client for remote MCP servers over the
// Streamable HTTP transport, protocol version 2025-11-25 only. It knows
// nothing of SQLite or of the call state machine: it sends messages, hands
// every protocol step to a [Sink] before going on, and reports failures as
// a classified [*Error]. It never retries a request that may have executed.
//
// # Caller's loop
//
//	c, err := transport.New(cfg)            // policy-checks the URL; no network
//	s, err := c.Connect(ctx, sink)          // initialize + notifications/initialized
//	cat, err := s.ListTools(ctx, sink)      // every page, bounded
//	tool, ok := cat.Find("search")          // record tool.Digest() at "prepared"
//	err = transport.ValidateArguments(tool, args) // a violation: nothing is sent
//	res, err := s.CallTool(ctx, transport.CallRequest{Tool: "search", Arguments: args}, sink)
//	err = transport.ValidateOutput(tool, res.StructuredContent) // unless res.IsError
//	_ = s.Close(ctx)                        // best-effort DELETE
//
// The sink is the caller's durability hook: an "out" frame reaches it
// before its bytes are sent, and every "in" frame (response, progress, log,
// server request, HTTP error) reaches it before the next one is read, so a
// slow sink slows the reader (backpressure) and a failing sink aborts the
// operation with [KindTransportLoss]. Frames are redacted: every resolved
// secret value is replaced by [Redacted] inside JSON string values, matched
// on the decoded text (any JSON escape spelling), never in member names,
// numbers or literals; the same holds for error messages, [CallResult]
// (whose IsError is read from the response as received), what a [Session]
// keeps of initialize and every [Tool] of a [Catalog] (whose digest,
// validation and task support read the tool as received; a tool whose name
// carries a secret is not listed). Text is scrubbed
// before it is cut to a bound, and a secret prefix of [MinSecretBytes] or
// more left at a cut is scrubbed too. A secret value shorter than
// [MinSecretBytes] is refused when resolved ([ErrSecretTooShort]), before
// anything is sent. Session ids are exposed only as [Session.IDDigest].
//
// Remote schemas are compiled and applied under a budget ([MaxSchemaBytes],
// [MaxSchemaNodes], the JSON depth bound, [MaxValidationSteps] worst-case
// evaluations computed before validating); over it, validation fails with
// [KindSchemaTooComplex], naming the tool and the bound.
//
// # Lifecycle and wire rules
//
// Every message is a POST with Accept "application/json, text/event-stream",
// Content-Type "application/json", Origin "agentctl://local", a User-Agent
// and, after initialize, MCP-Protocol-Version and the MCP-Session-Id the
// server issued. Responses are JSON or SSE; the response is matched by its
// JSON-RPC id (ids are integers counting from 1 per session, a server
// request reusing our id is not mistaken for the response). An SSE stream
// that ends before the response after an event id is resumed with GET and
// Last-Event-ID after the server's retry (default 1s, capped by
// Config.MaxResumeDelay), at most twice: resuming is not resending. Each
// GET is first handed to the sink as an "out" "resume" frame (Method and ID
// of the request, EventID = the Last-Event-ID, Body {"lastEventId",
// "attempt"} with attempt 1 or 2, plus "credentialRefresh": true on a retry
// after 401). A 401 on the GET re-resolves every [SecretRef] once and retries
// it with the same Last-Event-ID; a second 401 is [KindUnauthorized] with
// [Error.Accepted] set (possibly executed, never ambiguous). Any other
// failure to resume, or a third break, is [KindTransportLoss].
// A server request (method and id) on our stream is recorded as a
// "server_request" frame and answered, since JSON-RPC requires it: agentctl
// declares no roots or sampling, so the answer is the error {code -32601,
// message "method not found: agentctl declares no client capabilities"},
// except ping, which gets an empty result, and elicitation/create when
// [Config.Elicitation] declared that capability: the call's
// [ElicitationPolicy] answers (decline, the schema's defaults, or the
// author's values; a decline unless every required field fits). The answer is an "out" "response"
// frame (Method: the request's method) handed to the sink before it is
// POSTed with the session headers; the POST is best-effort (bounded to 2s,
// its outcome ignored, the stream not read meanwhile) and never fails the
// exchange.
//
// A 401 re-resolves every [SecretRef] once and resends the same message
// with the same id; a second 401 is [KindUnauthorized]. With a
// [Config.Authorizer] (package transport/oauth) every request carries its
// Authorization header, a 401 is first answered by
// [Authorizer.OnUnauthorized] (discovery, refresh or a new grant; its
// failure is [KindUnauthorized] wrapping the reason), and a 403
// insufficient_scope by [Authorizer.OnForbidden] at most [MaxStepUps] times
// per request; the message is then resent on a fresh connection. Neither
// status means the request executed. Timeout bounds inactivity (restarted
// by every SSE event; paused while the sink works and while the Authorizer
// answers), MaxDuration the whole request including the 401 resend and
// resumption.
// On timeout or cancellation after sending, a best-effort
// notifications/cancelled {requestId, reason} is sent (bounded to 2s, also
// handed to the sink, its outcome ignored); initialize is never cancelled.
//
// The network policy ([Policy]) is checked before any byte is sent: scheme,
// userinfo, port, host allowlist, and every resolved address against the
// private ranges; DNS is resolved once per Client and the dialer is pinned
// to the checked addresses. Redirects are never followed and no proxy is
// taken from the environment.
//
// # Error taxonomy
//
// [Error.Sent] says whether the request may have reached the server. Nothing
// is ambiguous or possibly executed unless it was sent.
//
//   - Ambiguous ([Error.Ambiguous]; may have executed, a fresh session may
//     help; the only redispatch triggers): session_expired (HTTP 404 on a
//     request that carried a session id), timeout, transport_loss (stream or
//     connection lost after sending, resumption impossible), malformed
//     (invalid JSON or UTF-8, wrong jsonrpc version, wrong or duplicate ids, nesting
//     over 128, a response over Policy.MaxResponseBytes or an SSE line or
//     event over the bound).
//   - Possibly executed ([Error.MayHaveExecuted] but not ambiguous; never
//     redispatched): http_status 5xx, cancelled after sending, and any
//     failure with [Error.Accepted] (unauthorized on the resume GET).
//   - Definitive: remote_error (JSON-RPC error), http_status 3xx/4xx other
//     than 401/404, unauthorized (on a POST), version_mismatch, policy_denied,
//     invalid_arguments, invalid_output, unsupported, and every failure
//     before sending. An isError result is not an error here: it is
//     returned in [CallResult.IsError] (kind tool_error is for callers).
//
// HTTP 400 is http_status and definitive, even though the reference
// TypeScript server answers 400 (not 404) for an unknown session: a 400 does
// not prove the session expired, so it is not treated as expiry.
//
// # Tasks (MCP 2025-11-25, experimental)
//
// A tool whose [Tool.TaskSupport] is required (or optional, when the caller
// wants it) is called with [Session.CallToolTask] if [Session.ToolCallTasks]
// says the server advertises tasks for tools/call. The CreateTaskResult's
// task id must be persisted before anything else: from then on the call is
// asked about, never resent. [Session.PollTask] waits the server's
// pollInterval (1s when absent or malformed, capped by
// Config.MaxPollInterval) between tasks/get; [Session.TaskResult] returns
// the tool's result exactly as tools/call would (one whose _meta
// related-task names another task is malformed); [Session.CancelTask]
// sends tasks/cancel. A task id is remote text: keep or print
// [Task.RedactedID]. After a restart, [Client.Reattach] binds the recorded
// [Session.SessionID] (a bearer credential: store it only sealed) without a
// new initialize; any session may ask about a task the server lets it reach. [TaskLost]
// says a poll found the task (or its session: 404) gone, which is ambiguous
// for the call; [PollAgain] says the poll may simply be repeated. A
// JSON-RPC -32042 is classified by [URLElicitationHosts].
// notifications/tools/list_changed on any stream sets [Session.ToolsChanged]
// until the next ListTools.
//
// # Concurrency
//
// A [Client] and a [Session] are safe for concurrent use: each call is its
// own HTTP exchange with its own id, and each call's frames reach that
// call's sink in order (there is no order across concurrent calls). The
// sink is called from the calling goroutine only.
package transport
