package vocab

import (
	"encoding/json"
	"strconv"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/canonjson"
)

// The facts every call of a live run appends (task.started, call.prepared,
// call.result, task.finished; run.started, and a borrowed session.opened
// and its catalog's copy, once a queued run) write their own JSON, byte for byte what
// encoding/json (SetEscapeHTML(false)) writes for them, without its
// reflection: events.PayloadAppender. FuzzFactJSON holds each to the
// reference encoder, so the stored payload, and the hash chain over it,
// does not depend on which encoder wrote it.

var (
	_ events.PayloadAppender = TaskStarted{}
	_ events.PayloadAppender = TaskFinished{}
	_ events.PayloadAppender = CallPrepared{}
	_ events.PayloadAppender = CallResult{}
	_ events.PayloadAppender = RunStarted{}
	_ events.PayloadAppender = SessionOpened{}
	_ events.PayloadAppender = SessionCatalog{}
)

// jsonOut appends members in order: name (with its leading comma or
// brace, and colon) then value; err keeps the first raw value that
// encoding/json would refuse.
type jsonOut struct {
	b   []byte
	err error
}

func (o *jsonOut) str(name, s string) {
	o.b = canonjson.AppendString(append(o.b, name...), s)
}

func (o *jsonOut) strOmit(name, s string) {
	if s != "" {
		o.str(name, s)
	}
}

func (o *jsonOut) int(name string, n int) {
	o.b = strconv.AppendInt(append(o.b, name...), int64(n), 10)
}

func (o *jsonOut) intOmit(name string, n int) {
	if n != 0 {
		o.int(name, n)
	}
}

func (o *jsonOut) bool(name string, v bool) {
	o.b = strconv.AppendBool(append(o.b, name...), v)
}

func (o *jsonOut) boolOmit(name string, v bool) {
	if v {
		o.bool(name, v)
	}
}

// raw appends a json.RawMessage member as encoding/json writes one:
// compacted, null when nil.
func (o *jsonOut) raw(name string, r json.RawMessage) {
	o.b = append(o.b, name...)
	if r == nil {
		o.b = append(o.b, "null"...)
		return
	}
	b, err := appendCompact(o.b, r)
	if err != nil {
		if o.err == nil {
			o.err = err
		}
		return
	}
	o.b = b
}

func (o *jsonOut) rawOmit(name string, r json.RawMessage) {
	if len(r) > 0 {
		o.raw(name, r)
	}
}

func (o *jsonOut) end() ([]byte, error) {
	if o.err != nil {
		return nil, o.err
	}
	return append(o.b, '}'), nil
}

// AppendJSON appends p as encoding/json writes it.
func (p TaskStarted) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonOut{b: dst}
	o.str(`{"taskId":`, p.TaskID)
	o.int(`,"attempt":`, p.Attempt)
	o.str(`,"server":`, p.Server)
	o.str(`,"tool":`, p.Tool)
	o.str(`,"action":`, p.Action)
	o.str(`,"idempotency":`, p.Idempotency)
	return o.end()
}

// AppendJSON appends p as encoding/json writes it.
func (p TaskFinished) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonOut{b: dst}
	o.str(`{"taskId":`, p.TaskID)
	o.int(`,"attempt":`, p.Attempt)
	o.str(`,"state":`, p.State)
	o.rawOmit(`,"output":`, p.Output)
	o.boolOmit(`,"outputOfCall":`, p.OutputOfCall)
	o.strOmit(`,"error":`, p.Error)
	o.strOmit(`,"errorKind":`, p.ErrorKind)
	return o.end()
}

// AppendJSON appends p as encoding/json writes it.
func (p CallPrepared) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonOut{b: dst}
	o.str(`{"effectId":`, p.EffectID)
	o.str(`,"taskId":`, p.TaskID)
	o.int(`,"attempt":`, p.Attempt)
	o.int(`,"ordinal":`, p.Ordinal)
	o.str(`,"server":`, p.Server)
	o.str(`,"tool":`, p.Tool)
	o.str(`,"idempotency":`, p.Idempotency)
	o.int(`,"generation":`, p.Generation)
	o.str(`,"argumentsDigest":`, p.ArgumentsDigest)
	o.str(`,"schemaDigest":`, p.SchemaDigest)
	o.raw(`,"arguments":`, p.Arguments)
	o.strOmit(`,"idempotencyKey":`, p.IdempotencyKey)
	o.strOmit(`,"sourceRunId":`, p.SourceRunID)
	o.strOmit(`,"sourceEffectId":`, p.SourceEffectID)
	o.strOmit(`,"state":`, p.State)
	o.strOmit(`,"sessionFrom":`, p.SessionFrom)
	return o.end()
}

// AppendJSON appends p as encoding/json writes it.
func (p CallResult) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonOut{b: dst}
	o.str(`{"effectId":`, p.EffectID)
	o.rawOmit(`,"jsonRpcId":`, p.JSONRPCID)
	o.bool(`,"isError":`, p.IsError)
	o.str(`,"resultDigest":`, p.ResultDigest)
	o.rawOmit(`,"output":`, p.Output)
	o.boolOmit(`,"outputInResponse":`, p.OutputInResponse)
	o.boolOmit(`,"structured":`, p.Structured)
	o.boolOmit(`,"viaTask":`, p.ViaTask)
	o.intOmit(`,"polls":`, p.Polls)
	if r := p.Received; r != nil {
		o.b = append(o.b, `,"received":`...)
		c := byte('{')
		if r.Kind != "" {
			o.b = canonjson.AppendString(append(o.b, `{"kind":`...), r.Kind)
			c = ','
		}
		if r.Message != "" {
			o.b = canonjson.AppendString(append(append(o.b, c), `"message":`...), r.Message)
			c = ','
		}
		if c == '{' {
			o.b = append(o.b, '{')
		}
		o.b = append(o.b, '}')
	}
	if m := p.Move; m != nil {
		o.b = m.appendJSON(append(o.b, `,"move":`...))
	}
	return o.end()
}

// AppendJSON appends p as encoding/json writes it.
func (p RunStarted) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonOut{b: dst}
	o.str(`{"worker":`, p.Worker)
	o.strOmit(`,"command":`, p.Command)
	return o.end()
}

// AppendJSON appends p as encoding/json writes it.
func (p SessionOpened) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonOut{b: dst}
	o.str(`{"remote":`, p.Remote)
	o.str(`,"url":`, p.URL)
	o.int(`,"generation":`, p.Generation)
	o.str(`,"taskId":`, p.TaskID)
	o.str(`,"protocolVersion":`, p.ProtocolVersion)
	o.rawOmit(`,"serverInfo":`, p.ServerInfo)
	o.strOmit(`,"sessionIdDigest":`, p.SessionIDDigest)
	o.strOmit(`,"sourceRunId":`, p.SourceRunID)
	o.strOmit(`,"sourceTaskId":`, p.SourceTaskID)
	o.boolOmit(`,"taskPoll":`, p.TaskPoll)
	if b := p.BorrowedFrom; b != nil {
		o.str(`,"borrowedFrom":{"runId":`, b.RunID)
		o.int(`,"generation":`, b.Generation)
		o.boolOmit(`,"toolCallTasks":`, b.ToolCallTasks)
		o.b = append(o.b, '}')
	}
	return o.end()
}

// AppendJSON appends p as encoding/json writes it.
func (p SessionCatalog) AppendJSON(dst []byte) ([]byte, error) {
	o := jsonOut{b: dst}
	o.str(`{"remote":`, p.Remote)
	o.int(`,"generation":`, p.Generation)
	o.str(`,"taskId":`, p.TaskID)
	o.str(`,"catalogDigest":`, p.CatalogDigest)
	o.b = append(o.b, `,"tools":`...)
	if p.Tools == nil {
		o.b = append(o.b, "null"...)
	} else {
		c := byte('[')
		for _, t := range p.Tools {
			o.str(string(c)+`{"name":`, t.Name)
			o.str(`,"digest":`, t.Digest)
			o.strOmit(`,"title":`, t.Title)
			o.strOmit(`,"description":`, t.Description)
			o.rawOmit(`,"inputSchema":`, t.InputSchema)
			o.rawOmit(`,"outputSchema":`, t.OutputSchema)
			o.rawOmit(`,"annotations":`, t.Annotations)
			o.rawOmit(`,"execution":`, t.Execution)
			o.b = append(o.b, '}')
			c = ','
		}
		if c == '[' {
			o.b = append(o.b, '[')
		}
		o.b = append(o.b, ']')
	}
	if len(p.Warnings) > 0 {
		c := byte('[')
		o.b = append(o.b, `,"warnings":`...)
		for _, w := range p.Warnings {
			o.b = canonjson.AppendString(append(o.b, c), w)
			c = ','
		}
		o.b = append(o.b, ']')
	}
	return o.end()
}
