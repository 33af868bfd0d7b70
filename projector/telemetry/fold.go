package telemetry

import (
	"encoding/json"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/termtext"
)

// Bounds on what a span carries from remote or workflow text.
const (
	maxText      = 256 // runes of a sanitized message
	maxToolName  = 64  // runes of a tool name
	maxToolNames = 64  // distinct tool names per run; later ones are "_other"
)

// span is one finished span as folded from the log.
type span struct {
	name          string
	id, parent    trace.SpanID
	kind          trace.SpanKind
	start, end    time.Time
	endSeq        int64
	attrs         []attribute.KeyValue
	status        codes.Code
	statusMessage string
	links         []trace.SpanID
	events        []spanEvent
	// set when the span is handed out
	trace        trace.TraceID
	traceState   trace.TraceState
	remoteParent bool // parent is the caller's span (TRACEPARENT)
}

type spanEvent struct {
	name string
	at   time.Time
}

// point is one metric measurement folded from the log.
type point struct {
	session bool // mcp.client.session.duration, else operation
	seconds float64
	attrs   []attribute.KeyValue
	endSeq  int64
}

// request is a request span in flight: sent, waiting for its response
// (and, for tools/call, the call's next state).
type request struct {
	sp       *span
	task     string // taskID/attempt that sent it
	effect   string
	answered bool
	errType  string
}

type session struct {
	opened          time.Time
	proto           string
	transport, addr string
	port            int
}

// fold turns the events of one run, in seq order, into spans and metric
// points. Only what ends after seq mark is handed to emit: the rest was
// exported by an earlier process.
type fold struct {
	runID   string
	traceID trace.TraceID
	parent  trace.SpanContext // the caller's span (TRACEPARENT), if any
	state   trace.TraceState
	mark    int64
	emit    func(*span)
	measure func(point)

	run      *span
	runEnded bool
	servers  map[string]string // remote → URL ("" for stdio)
	tasks    map[string]*span  // taskID/attempt → open span
	reqs     map[string]*request
	pending  map[string]*request // effect → tools/call answered, waiting for its state
	calls    map[string]*vocab.CallPrepared
	first    map[string]trace.SpanID // effect → its first request span
	sessions map[string]*session     // remote/generation
	tools    map[string]bool
	lastAt   time.Time
	lastSeq  int64
	err      error // the first payload that did not decode
}

func newFold(runID string, mark int64, emit func(*span), measure func(point)) *fold {
	return &fold{runID: runID, traceID: TraceID(runID), mark: mark, emit: emit, measure: measure,
		servers: map[string]string{}, tasks: map[string]*span{}, reqs: map[string]*request{}, pending: map[string]*request{},
		calls: map[string]*vocab.CallPrepared{}, first: map[string]trace.SpanID{}, sessions: map[string]*session{}, tools: map[string]bool{}}
}

func (f *fold) runAttr() attribute.KeyValue { return attribute.String("agentctl.run.id", f.runID) }

func (f *fold) done(sp *span, seq int64) {
	sp.endSeq = seq
	f.stamp(sp)
	if seq > f.mark && f.emit != nil {
		f.emit(sp)
	}
}

// add folds one committed event.
func (f *fold) add(e events.Event) {
	at, _ := time.Parse(time.RFC3339Nano, e.CreatedAt)
	defer func() { f.lastAt, f.lastSeq = at, e.Seq }()
	v, err := decode(e)
	if err != nil {
		if f.err == nil {
			f.err = err
		}
		return
	}
	switch p := v.(type) {
	case vocab.RunCreated:
		f.runCreated(&p, at)
	case runResumed:
		f.interrupted(e.Seq, "interrupted")
		if f.run != nil {
			f.run.events = append(f.run.events, spanEvent{name: "agentctl.run.resumed", at: at})
		}
		if f.runEnded { // a finished run resumed after a reconcile: a new segment
			f.run = &span{name: f.run.name, id: spanID("agentctl.run", f.runID, seqString(e.Seq)), parent: f.run.id,
				kind: trace.SpanKindInternal, start: at, attrs: f.run.attrs[:2:2]}
			f.runEnded = false
		}
	case vocab.RunFinished:
		f.runFinished(&p, at, e.Seq)
	case vocab.TaskStarted:
		f.tasks[taskKey(p.TaskID, p.Attempt)] = &span{name: "task " + bounded(p.TaskID, maxToolName), id: spanID("agentctl.task", f.runID, p.TaskID, strconv.Itoa(p.Attempt)),
			parent: f.runSpanID(), kind: trace.SpanKindInternal, start: at,
			attrs: []attribute.KeyValue{f.runAttr(), attribute.String("agentctl.task.id", bounded(p.TaskID, maxToolName)), attribute.Int("agentctl.task.attempt", p.Attempt),
				attribute.String("agentctl.remote", bounded(p.Server, maxToolName)), attribute.String("gen_ai.tool.name", f.tool(p.Tool)), attribute.String("agentctl.idempotency", p.Idempotency)}}
	case vocab.TaskFinished:
		k := taskKey(p.TaskID, p.Attempt)
		if sp := f.tasks[k]; sp != nil {
			for _, r := range f.reqs { // sent, never answered: the attempt ended on its failure
				if r.task == k && !r.answered {
					r.errType = bounded(p.ErrorKind, maxToolName)
					if r.errType == "" {
						r.errType = "no_response"
					}
					f.answer(r, at, e.Seq)
				}
			}
			f.settleTask(p.TaskID, p.Attempt, e.Seq)
			sp.end = at
			sp.attrs = append(sp.attrs, attribute.String("agentctl.task.state", p.State))
			if p.State != "succeeded" {
				sp.status, sp.statusMessage = codes.Error, bounded(p.Error, maxText)
			}
			delete(f.tasks, k)
			f.done(sp, e.Seq)
		}
	case vocab.SessionOpened:
		s := &session{opened: at, proto: p.ProtocolVersion}
		s.transport, s.addr, s.port = endpoint(p.URL)
		f.sessions[sessKey(p.Remote, p.Generation)] = s
	case vocab.SessionRef: // session.expired
		f.endSession(sessKey(p.Remote, p.Generation), at, e.Seq, "session_expired")
	case vocab.CallPrepared:
		f.calls[p.EffectID] = &p
	case vocab.CallError:
		for _, r := range f.reqs {
			if r.effect == p.EffectID && !r.answered {
				r.errType = bounded(p.Kind, maxToolName)
				f.answer(r, at, e.Seq)
			}
		}
	case vocab.Frame:
		f.frame(e, &p, at)
	}
	// A call's move (a call.transition, or the move its fact carries)
	// ends the tools/call span waiting for the call's next state.
	if t, ok := vocab.MoveOf(v); ok {
		if r := f.pending[t.EffectID]; r != nil {
			delete(f.pending, t.EffectID)
			r.sp.attrs = append(r.sp.attrs, attribute.String("agentctl.call.state", t.To))
			f.finishRequest(r, e.Seq)
		}
	}
}

func (f *fold) runCreated(p *vocab.RunCreated, at time.Time) {
	for name, u := range p.Servers {
		f.servers[name] = u
	}
	if sc, ok := ParseTraceparent(p.TraceParent); ok {
		f.traceID, f.parent = sc.TraceID(), sc
		if ts, err := trace.ParseTraceState(p.TraceState); err == nil {
			f.state = ts
		}
	}
	name := "run"
	if p.Workflow != "" {
		name += " " + bounded(p.Workflow, maxToolName)
	}
	f.run = &span{name: name, id: spanID("agentctl.run", f.runID), parent: f.parent.SpanID(), kind: trace.SpanKindInternal, start: at,
		attrs: []attribute.KeyValue{f.runAttr(), attribute.String("agentctl.workflow", bounded(p.Workflow, maxToolName)), attribute.String("agentctl.run.mode", p.Mode)}}
}

func (f *fold) runSpanID() trace.SpanID {
	if f.run != nil {
		return f.run.id
	}
	return spanID("agentctl.run", f.runID)
}

func (f *fold) runFinished(p *vocab.RunFinished, at time.Time, seq int64) {
	f.interrupted(seq, "")
	for k := range f.sessions {
		f.endSession(k, at, seq, "")
	}
	for k, sp := range f.tasks {
		sp.end = at
		delete(f.tasks, k)
		f.done(sp, seq)
	}
	if f.run == nil || f.runEnded {
		return
	}
	f.run.end = at
	f.run.attrs = append(f.run.attrs, attribute.String("agentctl.run.state", p.State), attribute.Int("agentctl.run.exit_code", p.ExitCode))
	if p.State != "succeeded" {
		f.run.status, f.run.statusMessage = codes.Error, bounded(p.Error, maxText)
	}
	f.runEnded = true
	f.done(f.run, seq)
}

// interrupted ends what a process that stopped left in flight: requests
// with no answer end at the last event before seq, as "interrupted", and
// so do its sessions when sessErr is set (a run that finished ends them at
// its end instead).
func (f *fold) interrupted(seq int64, sessErr string) {
	for _, r := range f.reqs {
		if !r.answered {
			r.errType = "interrupted"
			f.answer(r, f.lastAt, seq)
		}
	}
	for k, r := range f.pending {
		delete(f.pending, k)
		f.finishRequest(r, seq)
	}
	if sessErr == "" {
		return
	}
	for k := range f.sessions {
		f.endSession(k, f.lastAt, seq, sessErr)
	}
}

func (f *fold) frame(e events.Event, p *vocab.Frame, at time.Time) {
	key := reqKey(p.Remote, p.Generation, p.ID)
	if p.Dir == "out" && p.Kind == "request" {
		f.request(e, p, key, at)
		return
	}
	if p.Dir != "in" {
		return
	}
	r := f.reqs[key]
	if r == nil || r.answered {
		return
	}
	if p.Kind == "http_error" {
		r.errType = strconv.Itoa(p.HTTPStatus)
	} else {
		var m struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
			Result *struct {
				IsError         bool   `json:"isError"`
				ProtocolVersion string `json:"protocolVersion"` // initialize
			} `json:"result"`
		}
		if json.Unmarshal(p.Body, &m) == nil {
			if m.Result != nil && m.Result.ProtocolVersion != "" && attrOf(r.sp, "mcp.protocol.version") == "" {
				r.sp.attrs = append(r.sp.attrs, attribute.String("mcp.protocol.version", bounded(m.Result.ProtocolVersion, maxToolName)))
			}
			switch {
			case m.Error != nil:
				r.errType = strconv.Itoa(m.Error.Code)
				r.sp.attrs = append(r.sp.attrs, attribute.String("rpc.response.status_code", r.errType))
			case m.Result != nil && m.Result.IsError:
				r.errType = "tool_error"
			}
		}
	}
	f.answer(r, at, e.Seq)
}

func (f *fold) request(e events.Event, p *vocab.Frame, key string, at time.Time) {
	sid := spanID("agentctl.request", f.runID, seqString(e.Seq))
	var body struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(p.Body, &body) == nil {
		if tp, ok := body.Params.Meta["traceparent"].(string); ok {
			if sc, ok := ParseTraceparent(tp); ok && sc.TraceID() == f.traceID {
				sid = sc.SpanID() // what the server was told
			}
		}
	}
	parent := f.runSpanID()
	if t := f.tasks[taskKey(p.TaskID, p.Attempt)]; t != nil {
		parent = t.id
	}
	name := p.Method
	attrs := []attribute.KeyValue{f.runAttr(), attribute.String("mcp.method.name", p.Method), attribute.String("jsonrpc.request.id", string(p.ID)),
		attribute.String("agentctl.remote", bounded(p.Remote, maxToolName)), attribute.Int("agentctl.session.generation", p.Generation)}
	sp := &span{id: sid, parent: parent, kind: trace.SpanKindClient, start: at}
	if c := f.calls[p.EffectID]; c != nil && p.Method == "tools/call" {
		tool := f.tool(c.Tool)
		name += " " + tool
		attrs = append(attrs, attribute.String("gen_ai.tool.name", tool), attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("agentctl.effect.id", c.EffectID), attribute.String("agentctl.idempotency", c.Idempotency))
		if first, ok := f.first[c.EffectID]; ok {
			sp.links = append(sp.links, first)
			attrs = append(attrs, attribute.Bool("agentctl.redispatch", true))
		} else {
			f.first[c.EffectID] = sid
		}
	} else if p.EffectID != "" {
		attrs = append(attrs, attribute.String("agentctl.effect.id", p.EffectID))
	}
	transport, addr, port := endpoint(f.servers[p.Remote])
	proto := ""
	if s := f.sessions[sessKey(p.Remote, p.Generation)]; s != nil {
		transport, addr, port, proto = s.transport, s.addr, s.port, s.proto
	}
	attrs = append(attrs, attribute.String("network.transport", transport))
	if addr != "" {
		attrs = append(attrs, attribute.String("server.address", addr), attribute.Int("server.port", port))
	}
	if proto != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", proto))
	}
	sp.name, sp.attrs = name, attrs
	f.reqs[key] = &request{sp: sp, task: taskKey(p.TaskID, p.Attempt), effect: p.EffectID}
}

// answer ends a request span at its response (or failure): a tools/call
// waits for the call's next state, anything else is done.
func (f *fold) answer(r *request, at time.Time, seq int64) {
	r.answered = true
	r.sp.end = at
	for k, v := range f.reqs {
		if v == r {
			delete(f.reqs, k)
		}
	}
	if r.errType != "" {
		r.sp.status, r.sp.statusMessage = codes.Error, r.errType
		r.sp.attrs = append(r.sp.attrs, attribute.String("error.type", r.errType))
	}
	if r.effect != "" && f.calls[r.effect] != nil && spanMethod(r.sp) == "tools/call" {
		if old := f.pending[r.effect]; old != nil {
			f.finishRequest(old, seq)
		}
		f.pending[r.effect] = r
		return
	}
	f.finishRequest(r, seq)
}

func (f *fold) finishRequest(r *request, seq int64) {
	f.done(r.sp, seq)
	if seq > f.mark && f.measure != nil {
		attrs := make([]attribute.KeyValue, 0, len(r.sp.attrs))
		for _, a := range r.sp.attrs {
			switch a.Key {
			case "mcp.method.name", "gen_ai.tool.name", "gen_ai.operation.name", "error.type", "network.transport", "server.address", "server.port", "mcp.protocol.version", "rpc.response.status_code":
				attrs = append(attrs, a)
			}
		}
		f.measure(point{seconds: r.sp.end.Sub(r.sp.start).Seconds(), attrs: attrs, endSeq: seq})
	}
}

// settleTask finishes the pending tools/call spans of a task attempt
// (a call that ended without another transition).
func (f *fold) settleTask(taskID string, attempt int, seq int64) {
	for eff, r := range f.pending {
		if c := f.calls[eff]; c != nil && c.TaskID == taskID && c.Attempt == attempt {
			delete(f.pending, eff)
			f.finishRequest(r, seq)
		}
	}
}

func (f *fold) endSession(key string, at time.Time, seq int64, errType string) {
	s := f.sessions[key]
	if s == nil {
		return
	}
	delete(f.sessions, key)
	if seq <= f.mark || f.measure == nil {
		return
	}
	attrs := []attribute.KeyValue{attribute.String("network.transport", s.transport)}
	if s.proto != "" {
		attrs = append(attrs, attribute.String("mcp.protocol.version", s.proto))
	}
	if s.addr != "" {
		attrs = append(attrs, attribute.String("server.address", s.addr), attribute.Int("server.port", s.port))
	}
	if errType != "" {
		attrs = append(attrs, attribute.String("error.type", errType))
	}
	f.measure(point{session: true, seconds: at.Sub(s.opened).Seconds(), attrs: attrs, endSeq: seq})
}

func (f *fold) stamp(sp *span) {
	sp.trace, sp.traceState = f.traceID, f.state
	sp.remoteParent = f.parent.IsValid() && sp.parent == f.parent.SpanID()
}

// open returns the spans still open at the end of the log (a run killed
// and not resumed), ended at the last event: what `trace export` sends.
func (f *fold) open() []*span {
	var out []*span
	for _, r := range f.reqs {
		r.sp.end, r.sp.status, r.sp.statusMessage = f.lastAt, codes.Error, "interrupted"
		r.sp.attrs = append(r.sp.attrs, attribute.String("error.type", "interrupted"))
		out = append(out, r.sp)
	}
	for _, r := range f.pending {
		out = append(out, r.sp)
	}
	for _, sp := range f.tasks {
		sp.end = f.lastAt
		out = append(out, sp)
	}
	if f.run != nil && !f.runEnded {
		f.run.end = f.lastAt
		out = append(out, f.run)
	}
	for _, sp := range out {
		sp.endSeq = f.lastSeq
		f.stamp(sp)
	}
	return out
}

// tool bounds a tool name: sanitized, at most maxToolName runes, and at
// most maxToolNames distinct names per run.
func (f *fold) tool(name string) string {
	name = bounded(name, maxToolName)
	if !f.tools[name] {
		if len(f.tools) >= maxToolNames {
			return "_other"
		}
		f.tools[name] = true
	}
	return name
}

func spanMethod(sp *span) string { return attrOf(sp, "mcp.method.name") }

func attrOf(sp *span, key attribute.Key) string {
	for _, a := range sp.attrs {
		if a.Key == key {
			return a.Value.AsString()
		}
	}
	return ""
}

// bounded sanitizes remote or workflow text for a span: one line, no
// control or bidi characters, at most n runes.
func bounded(s string, n int) string {
	s = termtext.Line(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// endpoint reads network.transport, server.address and server.port from
// a remote's URL ("" for stdio: a pipe).
func endpoint(raw string) (transport, addr string, port int) {
	if raw == "" {
		return "pipe", "", 0
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "pipe", "", 0
	}
	host, p := u.Hostname(), u.Port()
	if p == "" {
		p = "80"
		if u.Scheme == "https" {
			p = "443"
		}
	}
	port, _ = strconv.Atoi(p)
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	return "tcp", host, port
}

func taskKey(task string, attempt int) string { return task + "/" + strconv.Itoa(attempt) }
func sessKey(remote string, gen int) string   { return remote + "/" + strconv.Itoa(gen) }
func reqKey(remote string, gen int, id json.RawMessage) string {
	return remote + "/" + strconv.Itoa(gen) + "/" + strings.TrimSpace(string(id))
}
