package transport

import (
	"encoding/json"
	"fmt"
	"sort"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// maxInputRequests bounds the input requests of one round.
const maxInputRequests = 32

// InputRequired is a 2026-07-28 InputRequiredResult (SEP-2322, "MRTR"): the
// server needs answers before the tool runs. The tool has not run, so
// re-issuing the request with the answers is legal for every idempotency
// class.
type InputRequired struct {
	// Requests are the server's input requests by key, each
	// {method, params} as received (redacted).
	Requests map[string]json.RawMessage
	// HasState reports whether the result carried requestState.
	HasState bool

	state string // requestState exactly as received, echoed byte for byte
}

// Methods lists the methods of the input requests, sorted, for records.
func (ir *InputRequired) Methods() []string {
	ms := make([]string, 0, len(ir.Requests))
	for k, raw := range ir.Requests {
		var r struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(raw, &r)
		ms = append(ms, k+"="+r.Method)
	}
	sort.Strings(ms)
	return ms
}

// inputRequired reads an InputRequiredResult.
func (s *Session) inputRequired(op string, result json.RawMessage) (*InputRequired, error) {
	var r struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  *string                    `json:"requestState"`
	}
	if err := strictUnmarshal(result, &r); err != nil {
		return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("input_required result: %v", err)}
	}
	if r.InputRequests == nil && r.RequestState == nil {
		return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: "input_required result with neither inputRequests nor requestState"}
	}
	if len(r.InputRequests) > maxInputRequests {
		return nil, &Error{Op: op, Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("input_required result with %d input requests (at most %d)", len(r.InputRequests), maxInputRequests)}
	}
	ir := &InputRequired{Requests: map[string]json.RawMessage{}}
	for k, v := range r.InputRequests {
		ir.Requests[k] = s.c.red.json(v)
	}
	if r.RequestState != nil {
		ir.HasState, ir.state = true, *r.RequestState
	}
	return ir, nil
}

// ParseInputRequired reads an InputRequiredResult as recorded (replay).
func ParseInputRequired(result json.RawMessage) (*InputRequired, error) {
	s := &Session{c: &Client{red: &redactor{}}}
	return s.inputRequired("tools/call", result)
}

// InputAnswer is what a call sends back for an InputRequired: the answers
// by key, and the request state to echo.
type InputAnswer struct {
	Responses map[string]json.RawMessage
	state     *string
}

// Answer answers every input request of ir by policy p (nil declines):
// elicitation/create as the 2025-11-25 elicitation/create request would be
// answered. Any other method (sampling/createMessage, roots/list: agentctl
// declares neither capability) cannot be answered; the error is
// KindUnsupported, and the call must fail (the tool has not run).
func (ir *InputRequired) Answer(p *ElicitationPolicy) (*InputAnswer, error) {
	a := &InputAnswer{Responses: map[string]json.RawMessage{}}
	if ir.HasState {
		st := ir.state
		a.state = &st
	}
	keys := make([]string, 0, len(ir.Requests))
	for k := range ir.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var r struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if err := json.Unmarshal(ir.Requests[k], &r); err != nil {
			return nil, &Error{Op: "tools/call", Kind: KindMalformed, Sent: true, Message: fmt.Sprintf("input request %q is not a request object", truncate(k, 64))}
		}
		switch r.Method {
		case methodElicitationCreate:
			a.Responses[k] = p.elicitResult(r.Params)
		default:
			return nil, &Error{Op: "tools/call", Kind: KindUnsupported, Sent: true, Code: codeMethodNotFound,
				Message: fmt.Sprintf("server asked for input %q by %s, which agentctl does not offer (no such client capability declared); the tool has not run", truncate(k, 64), truncate(r.Method, 64))}
		}
	}
	return a, nil
}

// JSON is the answer as recorded: {inputResponses, requestStatePresent}.
func (a *InputAnswer) JSON() json.RawMessage {
	b, _ := canonjson.Marshal(map[string]any{"inputResponses": a.Responses, "requestState": a.state != nil})
	return b
}
