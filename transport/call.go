package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// CallRequest is one tools/call.
type CallRequest struct {
	Tool          string
	Arguments     json.RawMessage // object
	Meta          map[string]any  // merged into params._meta (e.g. "agentctl.dev/idempotency-key")
	ProgressToken string          // "" = the client generates one; always sent as params._meta.progressToken
	// Elicitation answers the server's elicitation/create requests during
	// the call (when Config.Elicitation declared the capability); nil declines.
	Elicitation *ElicitationPolicy
	// Input re-issues a call that got an InputRequired (2026-07-28) with
	// the answers and the exact requestState; nil for a first request.
	Input *InputAnswer
}

// CallResult is a tools/call result. A result with isError true is returned
// here, not as an error: the caller decides.
type CallResult struct {
	Raw               json.RawMessage // the result object as received
	IsError           bool
	Content           json.RawMessage
	StructuredContent json.RawMessage
	ID                json.RawMessage // JSON-RPC id used
	// Received is the outputSchema verdict on structuredContent as the
	// server sent it, set by CheckReceived when redaction changed what
	// StructuredContent holds (nil otherwise): the outcome of a call is
	// decided on the response as received, not on its redacted copy. A
	// replay sets it from the record.
	Received *OutputCheck
	// InputRequired is set (and nothing else but Raw and ID) when a
	// 2026-07-28 server answered resultType "input_required": the tool has
	// not run yet.
	InputRequired *InputRequired
	// Task is set (and nothing else but Raw and ID) when a 2026-07-28
	// server answered resultType "task" (the tasks extension, declared by
	// Config.TasksExtension): the call goes on as that task (tasks2026.go).
	Task *Task

	received json.RawMessage // structuredContent before redaction, when redaction changed it
	red      *redactor
}

// OutputCheck is the verdict of a tool's outputSchema on a result: Kind
// is "" when it is valid, else the failure's kind (KindInvalidOutput,
// KindSchemaTooComplex) with its message, redacted.
type OutputCheck struct {
	Kind    Kind
	Message string
}

// Err returns the verdict as an *Error, nil when valid.
func (c *OutputCheck) Err() error {
	if c == nil || c.Kind == "" {
		return nil
	}
	return &Error{Op: "validate output", Kind: c.Kind, Message: c.Message}
}

// CheckReceived validates, when redaction changed res's structuredContent
// or t's outputSchema, the value as received against the schema as
// received and records the verdict in res.Received (its message redacted:
// a schema error may quote the value or the schema). It does nothing when
// redaction changed neither, for an isError result, or when res.Received is
// already set. A validation ctx stops is recorded as its verdict
// (KindCancelled or KindTimeout): the check did not pass.
func CheckReceived(ctx context.Context, t Tool, res *CallResult) {
	if res == nil || res.Received != nil || res.IsError {
		return
	}
	doc := res.received
	if doc == nil {
		if !t.OutputSchemaRedacted() {
			return
		}
		doc = res.StructuredContent // redaction did not change it
	}
	err := ValidateOutputContext(ctx, t, doc)
	if err == nil {
		res.Received = &OutputCheck{}
		return
	}
	msg := err.Error()
	var e *Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	res.Received = &OutputCheck{Kind: KindOf(err), Message: res.red.string(msg)}
}

// IdempotencyKeyMeta is the params._meta key carrying a keyed call's effect identity.
const IdempotencyKeyMeta = "agentctl.dev/idempotency-key"

// CallTool sends tools/call and waits for its response, handing every frame
// (progress, logs, server requests) to sink in order. Arguments are not
// validated here; see ValidateArguments.
func (s *Session) CallTool(ctx context.Context, req CallRequest, sink Sink) (*CallResult, error) {
	params, id, err := s.callParams(req)
	if err != nil {
		return nil, err
	}
	m, err := s.roundTrip(withElicitation(ctx, req.Elicitation), "tools/call", params, sink, id)
	if err != nil {
		return nil, err
	}
	return s.callResult("tools/call", m.Result, id)
}

// callParams builds the params of a tools/call and allocates its id.
func (s *Session) callParams(req CallRequest) (map[string]any, json.RawMessage, error) {
	args := req.Arguments
	if !present(args) {
		args = json.RawMessage("{}")
	}
	if err := checkDepth(args); err != nil || !json.Valid(args) || args[0] != '{' {
		return nil, nil, &Error{Op: "tools/call", Kind: KindInvalidArguments, Message: "arguments must be a JSON object"}
	}
	meta := map[string]any{}
	maps.Copy(meta, req.Meta)
	id := s.newID()
	token := req.ProgressToken
	if token == "" {
		token = "agentctl-" + string(id)
	}
	meta["progressToken"] = token
	params := map[string]any{"name": req.Tool, "arguments": args, "_meta": meta}
	if in := req.Input; in != nil {
		params["inputResponses"] = in.Responses
		if in.state != nil {
			params["requestState"] = *in.state
		}
	}
	return params, id, nil
}

// callResult reads a CallToolResult (of tools/call, or of tasks/result for
// a task), redacted.
func (s *Session) callResult(op string, result json.RawMessage, id json.RawMessage) (*CallResult, error) {
	if s.stateless() && len(result) > 0 && result[0] == '{' {
		rt, err := resultType(result)
		if err != nil {
			return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "result is not a CallToolResult object"}
		}
		switch rt {
		case "complete":
		case "input_required":
			if op != "tools/call" {
				return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "input_required result to " + op}
			}
			ir, err := s.inputRequired(op, result)
			if err != nil {
				return nil, err
			}
			return &CallResult{Raw: s.c.red.json(result), ID: id, InputRequired: ir, red: s.c.red}, nil
		case resultTypeTask:
			return s.createdTask(op, result, id)
		default:
			return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("unknown resultType %q", s.c.red.cut(rt, 64))}
		}
	}
	var res struct {
		IsError           bool            `json:"isError"`
		Content           json.RawMessage `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := strictUnmarshal(result, &res); err != nil || result[0] != '{' {
		return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "result is not a CallToolResult object"}
	}
	red := s.c.red // a server echoing a credential must not put it in workflow state
	out := &CallResult{Raw: red.json(result), IsError: res.IsError, Content: red.json(res.Content),
		StructuredContent: red.json(nonNull(res.StructuredContent)), ID: id, red: red}
	if sc := nonNull(res.StructuredContent); !bytes.Equal(sc, out.StructuredContent) {
		out.received = slices.Clone(sc)
	}
	return out, nil
}
