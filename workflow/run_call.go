package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/internal/canonjson"
	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// IdempotencyKeyMeta is the params._meta key that carries a keyed call's
// idempotency key (its effect identity).
const IdempotencyKeyMeta = "agentctl.dev/idempotency-key"

// call drives one tools/call through the state machine: decide, persist the
// transition, act, fire the outcome. A call is fresh (run) or picked up from
// the log by resume; either way every decision comes from fsm.
type call struct {
	rn      *run
	task    spec.TaskSpec
	attempt int
	remote  string
	gen     int          // generation of the session the call is on
	rs      *remoteState // the live session; nil until one is open (resume)
	tool    transport.Tool
	// schemaDigest is the tool's digest recorded at prepared: the one a
	// redispatch must find unchanged.
	schemaDigest string
	args         json.RawMessage
	m            fsm.Call

	effectID string
	lastErr  error
	reason   string // of the last transition
	// cancelled: the user cancelled while the request was in flight.
	cancelled bool
	// sent: the call was dispatched (its request may have left), so a
	// failure may follow a tool that ran (failure).
	sent bool

	// MCP tasks (run_call_task.go): useTask says the call goes out as a
	// task with ttl; taskID is the accepted task, polls the tasks/get sent,
	// lastStatus the last (status, message) seen, viaTask that the
	// result came from tasks/result.
	useTask    bool
	ttl        time.Duration
	taskID     string
	polls      int
	lastStatus string
	viaTask    bool
	// inline: the task is a 2026-07-28 one (the tasks extension), whose
	// tasks/get carries the outcome (run_call_task2026.go).
	inline bool
	// updated are the input request keys of the task already answered
	// with tasks/update (2026-07-28), updates how many were sent.
	updated map[string]bool
	updates int
	// taskShown is taskID as kept and printed (redacted); tb the task
	// call's bounds (task_bounds.go).
	taskShown string
	tb        taskBounds

	// input answers the last input-required result (2026-07-28): the
	// request is re-issued with it; nil before any.
	input *transport.InputAnswer

	// response is the response frame of the last plain send as this run
	// recorded it (nil for a replay's, which records a reference): a
	// call.result whose output it holds leaves the output out.
	response *vocab.Frame
	// ofResult: the call's output is its call.result's (not an
	// operator's reconciled result), so task.finished may leave it out.
	ofResult bool
}

// callFailure is a definitive failure decided by agentctl itself. err,
// when set, is the failure it words (its kind still classifies it).
type callFailure struct {
	kind transport.Kind
	msg  string
	err  error
}

func (f *callFailure) Error() string { return f.msg }

// Unwrap returns the failure f words, or nil.
func (f *callFailure) Unwrap() error { return f.err }

// run prepares a fresh call, checks it and sends it.
func (c *call) run(ctx context.Context) (any, error) {
	rn := c.rn
	argDigest := canonjson.DigestBytes(c.args)
	c.effectID = EffectID(rn.id, c.task.ID, c.attempt, 1, argDigest)
	c.remote, c.gen, c.schemaDigest = c.rs.name, c.rs.gen, c.tool.Digest()
	prep := vocab.CallPrepared{EffectID: c.effectID, TaskID: c.task.ID, Attempt: c.attempt, Ordinal: 1, Server: c.task.With.Server,
		Tool: c.tool.Name, Idempotency: string(c.m.Idempotency), Generation: c.rs.gen, ArgumentsDigest: argDigest,
		SchemaDigest: c.schemaDigest, Arguments: c.args, State: string(fsm.Prepared)}
	if c.m.Idempotency == fsm.Keyed {
		prep.IdempotencyKey = c.effectID
	}
	if rec, ok := c.rs.sess.(Recorded); ok {
		prep.SourceRunID, prep.SourceEffectID = rec.SourceRunID(), rec.Expect(c.task.ID, c.attempt, 1)
	}
	// Committed with the dispatch transition and the request frame.
	rn.later(events.Record{Stream: c.stream(), Type: vocab.TypeCallPrepared, Payload: prep})
	return c.dispatch(ctx)
}

// dispatch runs the checks that need no request (a violation fails the
// call definitively and nothing is sent), then sends the call once.
func (c *call) dispatch(ctx context.Context) (any, error) {
	if err := c.prepareTask(ctx); err != nil {
		return nil, err
	}
	if err := transport.ValidateArgumentsContext(ctx, c.tool, c.args); err != nil {
		if ctx.Err() != nil { // a deadline or the user's cancel stopped the check: nothing is sent
			return nil, c.stopBeforeSend(ctx, err)
		}
		return nil, c.failDefinitive(ctx, invalidArguments(c.tool.Name, err))
	}
	// The dispatch transition is committed together with the request frame,
	// before the request's bytes leave.
	if _, err := c.fire(fsm.Dispatch, "", true); err != nil {
		return nil, err
	}
	return c.send(ctx)
}

// request is the tools/call as sent, identical on every send: keyed calls
// carry their effect identity as the idempotency key, others carry none.
func (c *call) request() transport.CallRequest {
	req := transport.CallRequest{Tool: c.tool.Name, Arguments: c.args, ProgressToken: c.effectID[:16],
		Elicitation: c.rn.wf.Action(c.task).Elicitation.Policy(), Input: c.input}
	if c.m.Idempotency == fsm.Keyed {
		req.Meta = map[string]any{IdempotencyKeyMeta: c.effectID}
	}
	return req
}

// send sends the request on the live session (the dispatch or resend
// transition is pending) and follows the machine until the call ends.
func (c *call) send(ctx context.Context) (any, error) {
	rn := c.rn
	for {
		var res *transport.CallResult
		var err error
		if ts := c.taskSession(); c.useTask && ts != nil {
			var tc *transport.TaskCall
			tc, err = ts.CallToolTask(ctx, c.request(), c.ttl, c.rn.frameSink(c.stream(), c.frameBase(), true))
			if err == nil && tc.Task != nil {
				return c.accepted(ctx, ts, tc)
			}
			if err == nil {
				res = tc.Result // the server answered the call directly
			}
		} else {
			res, err = c.rs.sess.CallTool(ctx, c.request(), c.responseSink(c.rn.frameSink(c.stream(), c.frameBase(), true)))
			if err == nil && res.Task != nil && ts != nil { // 2026-07-28: the server made the call a task
				c.inline = true
				return c.accepted(ctx, ts, &transport.TaskCall{Task: res.Task, ID: res.ID})
			}
		}
		if err == nil && res.InputRequired != nil {
			if err := c.answerInput(ctx, res.InputRequired); err != nil {
				return nil, err
			}
			continue
		}
		if err == nil {
			return c.complete(ctx, res)
		}
		if len(rn.pending) > 0 { // the transition (if nothing was sent) and any held response
			if aerr := rn.append(); aerr != nil {
				return nil, aerr
			}
		}
		c.lastErr = err
		c.rs.poolRefused(err)
		trigger, reason := triggerFor(ctx, err), err.Error()
		if why, ok := urlElicitation(err); ok {
			trigger, reason = fsm.URLElicitationRequired, why
			err = fmt.Errorf("%s: %s: %w", fsm.ReasonURLElicitationRequired, why, err)
		}
		c.noteUserCancel(ctx)
		if _, cancelled := replayedCtxEnd(err); cancelled {
			c.cancelled = true // a replay's context never ends: its source's user stopped it here
		}
		rec := c.errorRecord(err)
		if transport.KindOf(err) == transport.KindSessionExpired {
			if aerr := rn.append(events.Record{Stream: sessionStream(c.rs.name, c.rs.gen), Type: vocab.TypeSessionExpired,
				Payload: vocab.SessionRef{Remote: c.rs.name, Generation: c.rs.gen, TaskID: c.task.ID}}); aerr != nil {
				return nil, aerr
			}
			rn.retire(c.rs)
		}
		rn.pending = append(rn.pending, rec)
		dec, ferr := c.fire(trigger, reason, false)
		if ferr != nil {
			return nil, ferr
		}
		if dec != fsm.DecideReconnect {
			return nil, err
		}
		if err := c.reconnect(ctx); err != nil {
			return nil, err
		}
	}
}

// reconnect opens the next session, refreshes tools/list and compares the
// tool's schema digest with the one recorded at prepared before allowing
// the one resend; on success the Reconnected transition is pending. When
// several calls of concurrent tasks lost the same session, the first opens
// the next generation and the others use it: it was initialized, and its
// tools listed, after the session they were sent on was given up.
func (c *call) reconnect(ctx context.Context) error {
	rn := c.rn
	rn.sessMu.Lock()
	rs := rn.current(c.remote)
	var err error
	switch {
	case rs != nil && rs.gen > c.gen:
		rn.attach(rs, c.task.ID)
	default:
		if rs != nil {
			rn.retire(rs)
		}
		rs, err = rn.openSession(ctx, c.remote, c.task.ID, c.attempt)
	}
	rn.sessMu.Unlock()
	if err != nil {
		rn.pending = append(rn.pending, c.errorRecord(err))
		if _, ferr := c.fire(fsm.ReconnectFailed, err.Error(), false); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	c.rs, c.gen = rs, rs.gen
	tool, trigger, f := c.sameTool(rs, true)
	if f != nil {
		rn.pending = append(rn.pending, c.errorRecord(f))
		_, ferr := c.fire(trigger, f.msg, false)
		return errors.Join(f, ferr)
	}
	c.tool = tool
	_, err = c.fire(fsm.Reconnected, "", true)
	return err
}

// sameTool finds the call's tool in the catalog of the session rs just
// opened and checks that its schema digest is the one recorded at
// prepared: only then may the call be sent on rs (resend: sent again
// after a reconnect; otherwise: a prepared call resume sends at last).
// Else it returns the definitive failure and the trigger that records it.
func (c *call) sameTool(rs *remoteState, resend bool) (transport.Tool, fsm.Trigger, *callFailure) {
	tool, ok := rs.catalog.Find(c.tool.Name)
	switch {
	case !ok && resend:
		return tool, fsm.ToolMissing, &callFailure{kind: fsm.ReasonToolMissing,
			msg: fmt.Sprintf("tool %q is gone after reconnecting to %q (generation %d); not resent", c.tool.Name, rs.name, rs.gen)}
	case !ok:
		return tool, fsm.ToolMissing, &callFailure{kind: fsm.ReasonToolMissing,
			msg: fmt.Sprintf("%s: tool %q is gone from %q (generation %d); not sent", fsm.ReasonToolMissing, c.tool.Name, rs.name, rs.gen)}
	case tool.Digest() != c.schemaDigest && resend:
		return tool, fsm.SchemaChanged, &callFailure{kind: fsm.ReasonSchemaChanged,
			msg: fmt.Sprintf("tool %q changed schema after reconnecting (%s → %s); not resent", c.tool.Name, c.schemaDigest, tool.Digest())}
	case tool.Digest() != c.schemaDigest:
		return tool, fsm.SchemaChanged, &callFailure{kind: fsm.ReasonSchemaChanged,
			msg: fmt.Sprintf("%s: tool %q changed schema since prepared (%s → %s); not sent", fsm.ReasonSchemaChanged, c.tool.Name, c.schemaDigest, tool.Digest())}
	}
	return tool, "", nil
}

// complete validates a result and ends the call.
func (c *call) complete(ctx context.Context, res *transport.CallResult) (any, error) {
	rn := c.rn
	output := res.StructuredContent
	if len(output) == 0 {
		output = res.Content
	}
	digest := canonjson.DigestBytes(res.Raw)
	// When redaction changed structuredContent, the outputSchema decides on
	// the value as received; the verdict is recorded for resume and replay.
	transport.CheckReceived(ctx, c.tool, res)
	rec := vocab.CallResult{EffectID: c.effectID, JSONRPCID: res.ID, IsError: res.IsError, ResultDigest: digest, Output: output,
		Structured: len(res.StructuredContent) > 0, ViaTask: c.viaTask}
	if v := res.Received; v != nil {
		rec.Received = &vocab.OutputCheck{Kind: string(v.Kind), Message: v.Message}
	}
	if c.viaTask {
		rec.Polls = c.polls
	}
	rn.later(events.Record{Stream: c.stream(), Type: vocab.TypeCallResult, Payload: c.stored(rec)})
	if !res.IsError && !cheapToValidate(c.tool, res) {
		// The response frame and call.result are on disk before a
		// validation that may cost real work starts: whatever it does
		// (it is bounded, see transport's schema budget), the evidence of
		// what the server answered is already kept.
		if err := rn.append(); err != nil {
			return nil, err
		}
	}
	return c.conclude(ctx, rec)
}

// cheapToValidateBytes bounds the results whose validation rides with the
// outcome's commit instead of following a commit of its own.
const cheapToValidateBytes = 16 << 10

// cheapToValidate reports whether validating res against the tool's
// outputSchema is trivially cheap: a small result and a schema with no
// reference or combinator, whose validation is one walk of the value. Such
// a validation rides with the outcome's commit (one commit per call); any
// other starts only after the response frame is committed.
func cheapToValidate(t transport.Tool, res *transport.CallResult) bool {
	if len(t.OutputSchema) == 0 {
		return len(res.StructuredContent) == 0
	}
	if len(res.Raw) > cheapToValidateBytes || len(t.OutputSchema) > cheapToValidateBytes {
		return false
	}
	// A member name may be spelled with \u escapes ("\u0024ref" is "$ref"):
	// a schema with any is not looked into.
	if bytes.Contains(t.OutputSchema, []byte(`\u`)) {
		return false
	}
	for _, kw := range []string{`"$ref"`, `"$dynamicRef"`, `"$recursiveRef"`, `"allOf"`, `"anyOf"`, `"oneOf"`, `"not"`, `"if"`, `"dependentSchemas"`, `"patternProperties"`, `"unevaluatedProperties"`, `"unevaluatedItems"`, `"contains"`} {
		if bytes.Contains(t.OutputSchema, []byte(kw)) {
			return false
		}
	}
	return true
}

// conclude validates a recorded result and ends the call: isError and an
// output that violates the tool's outputSchema are definitive failures. It
// needs nothing but the record, so resume can finish a call whose result
// reached the log before the process ended.
func (c *call) conclude(ctx context.Context, rec vocab.CallResult) (any, error) {
	var structured json.RawMessage
	if rec.Structured {
		structured = rec.Output
	}
	if rec.IsError {
		return nil, c.failDefinitive(ctx, &callFailure{kind: transport.KindToolError, msg: fmt.Sprintf("tool %q returned isError: %s", c.tool.Name, contentText(rec.Output))})
	}
	if v := rec.Received; v != nil {
		if err := (&transport.OutputCheck{Kind: transport.Kind(v.Kind), Message: v.Message}).Err(); err != nil {
			c.noteUserCancel(ctx) // the user stopped the run while the result was checked
			return nil, c.failUnusable(ctx, err)
		}
	} else if len(structured) > 0 || len(c.tool.OutputSchema) > 0 {
		if err := transport.ValidateOutputContext(ctx, c.tool, structured); err != nil {
			c.noteUserCancel(ctx) // the user stopped the run while the result was checked
			return nil, c.failUnusable(ctx, err)
		}
	}
	if len(rec.Output) == 0 {
		return nil, c.failUnusable(ctx, &callFailure{kind: transport.KindMalformed, msg: errNoOutput.Error()})
	}
	// Committed with task.finished: the outcome is one transaction.
	if _, err := c.fire(fsm.Succeed, "", true); err != nil {
		return nil, err
	}
	c.ofResult = true
	return decodeOutput(rec.Output)
}

// responseSink is sink noting the response frame of a plain send as
// recorded (c.response), for stored.
func (c *call) responseSink(sink transport.Sink) transport.Sink {
	c.response = nil
	return func(ctx context.Context, f transport.Frame) error {
		if f.Dir == "in" && f.Kind == "response" {
			c.response = &vocab.Frame{Dir: f.Dir, Kind: f.Kind, ID: f.ID, Body: frameBody(f.Body)}
		}
		return sink(ctx, f)
	}
}

// minLeftOut is the size from which an output is left out of call.result
// and task.finished: a shorter one costs less than the marker
// ("outputInResponse":true, "outputOfCall":true) that would replace it.
const minLeftOut = 24

// stored is rec as the log keeps it: without its output when the response
// frame this run recorded for the call holds exactly that output
// (vocab.FrameOutput), so that the output is stored once.
func (c *call) stored(rec vocab.CallResult) vocab.CallResult {
	if c.response == nil || c.viaTask || len(rec.Output) < minLeftOut {
		return rec
	}
	out, err := vocab.FrameOutput(*c.response, rec.JSONRPCID, rec.ResultDigest, rec.Structured)
	if err != nil || !bytes.Equal(out, rec.Output) {
		return rec
	}
	rec.Output, rec.OutputInResponse = nil, true
	return rec
}

// decodeOutput turns a recorded output into a workflow value.
func decodeOutput(output json.RawMessage) (any, error) {
	var v any
	if err := decodeJSON(output, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// failUnusable ends a call whose result arrived but cannot be used (it
// violates the tool's outputSchema, or carries no output): the tool ran,
// so for at_most_once and unknown, whose retry would run it again, the
// call ends uncertain (the operator reconciles it, with a corrected result
// if it was applied); for pure, idempotent and keyed it fails, and the
// action's retry policy may follow. A check stopped by the task's deadline
// or the user's cancel fails as before: the run is stopping.
func (c *call) failUnusable(ctx context.Context, err error) error {
	if c.m.Idempotency.Redispatchable() || ctx.Err() != nil {
		return c.failDefinitive(ctx, err)
	}
	c.lastErr = err
	c.rn.pending = append(c.rn.pending, c.errorRecord(err))
	if _, ferr := c.fire(fsm.FailPossiblyExecuted, err.Error(), false); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// invalidArguments labels an inputSchema violation found before sending
// as what it is, a local failure (not a transport one), keeping its kind.
func invalidArguments(tool string, err error) error {
	var te *transport.Error
	if !errors.As(err, &te) || te.Kind != transport.KindInvalidArguments {
		return err // schema_too_complex and the like keep their own words
	}
	return &callFailure{kind: transport.KindInvalidArguments, err: err,
		msg: fmt.Sprintf("arguments of tool %q violate its inputSchema (checked before sending; nothing was sent): %s", tool, strings.TrimPrefix(te.Message, fmt.Sprintf("tool %q: ", tool)))}
}

func (c *call) failDefinitive(_ context.Context, err error) error {
	c.lastErr = err
	c.rn.pending = append(c.rn.pending, c.errorRecord(err))
	if _, ferr := c.fire(fsm.FailDefinitive, err.Error(), false); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// noteUserCancel records that the user's cancel (not a task's
// timeoutSeconds, a deadline) ended the call: the run then exits cancelled.
func (c *call) noteUserCancel(ctx context.Context) {
	if errors.Is(ctx.Err(), context.Canceled) {
		c.cancelled = true
	}
}

// stopBeforeSend ends a call that ctx stopped before its request was sent
// (the machine's Cancel from prepared: cancelled, nothing executed).
func (c *call) stopBeforeSend(ctx context.Context, err error) error {
	c.lastErr = err
	c.noteUserCancel(ctx)
	c.rn.pending = append(c.rn.pending, c.errorRecord(err))
	if _, ferr := c.fire(fsm.Cancel, err.Error(), false); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

func (c *call) errorRecord(err error) events.Record {
	p := vocab.CallError{EffectID: c.effectID, Message: err.Error()}
	var te *transport.Error
	var cf *callFailure
	switch {
	case errors.As(err, &te):
		p.Kind, p.Status, p.Code = string(te.Kind), te.Status, te.Code
	case errors.As(err, &cf):
		p.Kind = string(cf.kind)
	default:
		p.Kind = "error"
	}
	return events.Record{Stream: c.stream(), Type: vocab.TypeCallError, Payload: p}
}

// fire moves the state machine and records the transition. With defer set,
// the transition is committed with the next record (the request frame), so
// intent and request become durable together, before any byte is sent.
func (c *call) fire(t fsm.Trigger, reason string, deferred bool) (fsm.Decision, error) {
	from := c.m
	next, tr, dec, err := fsm.Fire(c.m, t, reason)
	if err != nil {
		return fsm.DecideNone, fmt.Errorf("call %s: %w", c.effectID, err)
	}
	c.m, c.reason = next, tr.Reason
	c.sent = c.sent || tr.To == fsm.Dispatched
	p := vocab.CallTransition{EffectID: c.effectID, From: string(from.State), To: string(tr.To), Trigger: string(tr.Trigger), Reason: tr.Reason,
		Generation: c.gen, Redispatches: next.Redispatches}
	rec := events.Record{Stream: c.stream(), Type: vocab.TypeCallTransition, Payload: p}
	c.rn.pending = append(c.rn.pending, rec)
	if deferred {
		return dec, nil
	}
	return dec, c.rn.append()
}

func (c *call) stream() string { return "call/" + c.effectID }

func (c *call) frameBase() vocab.Frame {
	return vocab.Frame{Remote: c.remote, Generation: c.gen, TaskID: c.task.ID, Attempt: c.attempt, EffectID: c.effectID}
}

// exitCode maps how the call ended to the run's exit code.
func (c *call) exitCode(err error) int {
	if c.cancelled { // the user stopped the run; the call may still be uncertain
		return ExitCancelled
	}
	switch c.m.State {
	case fsm.Uncertain:
		return ExitUncertain
	case fsm.Cancelled:
		return ExitCancelled
	case fsm.Failed:
		var cf *callFailure
		if errors.As(err, &cf) {
			return ExitFailed
		}
		return exitFor(err)
	}
	return exitFor(err)
}

// triggerFor classifies a transport failure for the state machine.
func triggerFor(ctx context.Context, err error) fsm.Trigger {
	if ctx.Err() != nil {
		return fsm.Cancel
	}
	var te *transport.Error
	if !errors.As(err, &te) {
		return fsm.FailPossiblyExecuted
	}
	switch {
	case te.Kind == transport.KindCancelled:
		return fsm.Cancel
	case te.Ambiguous():
		return fsm.FailAmbiguous
	case te.MayHaveExecuted():
		return fsm.FailPossiblyExecuted
	}
	return fsm.FailDefinitive
}

// contentText summarises a content array for an error message.
func contentText(content json.RawMessage) string {
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return string(content)
	}
	var s string
	for _, b := range blocks {
		if b.Type == "text" {
			if s != "" {
				s += " "
			}
			s += b.Text
		}
	}
	if len(s) > 512 {
		s = s[:512] + "…"
	}
	return termtext.Block(s)
}
