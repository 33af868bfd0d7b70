package telemetry

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// logb builds a run's events by hand, 10 ms apart.
type logb struct {
	run string
	evs []events.Event
	t0  time.Time
}

func newLog(run string) *logb {
	return &logb{run: run, t0: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (l *logb) add(typ string, payload any) *logb {
	b, err := json.Marshal(payload)
	if err != nil {
		panic(err)
	}
	seq := int64(len(l.evs) + 1)
	l.evs = append(l.evs, events.Event{RunID: l.run, Seq: seq, Type: typ, Payload: string(b),
		CreatedAt: l.t0.Add(time.Duration(seq) * 10 * time.Millisecond).Format(time.RFC3339Nano)})
	return l
}

func (l *logb) frame(dir, kind, method string, id int, gen int, task string, effect, body string) *logb {
	return l.add(vocab.FramePrefix+kind, vocab.Frame{Dir: dir, Kind: kind, Method: method, ID: json.RawMessage(fmt.Sprint(id)),
		Remote: "r", Generation: gen, TaskID: task, Attempt: 1, EffectID: effect, Body: json.RawMessage(body)})
}

func (l *logb) fold(mark int64) ([]*span, []point) {
	var spans []*span
	var pts []point
	f := newFold(l.run, mark, func(s *span) { spans = append(spans, s) }, func(p point) { pts = append(pts, p) })
	for _, e := range l.evs {
		f.add(e)
	}
	if f.err != nil {
		panic(f.err)
	}
	return spans, pts
}

func attr(s *span, k string) string {
	for _, a := range s.attrs {
		if string(a.Key) == k {
			return a.Value.String()
		}
	}
	return ""
}

func named(spans []*span, name string) []*span {
	var out []*span
	for _, s := range spans {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// callLog: a tools/call that times out, is redispatched on a new session
// and succeeds; then a second call answered with a JSON-RPC error.
func callLog() *logb {
	l := newLog("run-1")
	l.add(vocab.TypeRunCreated, vocab.RunCreated{RunID: "run-1", Workflow: "wf", Servers: map[string]string{"r": "http://127.0.0.1:9/mcp"}})
	l.add(vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: "a", Attempt: 1, Server: "r", Tool: "t"})
	l.add(vocab.TypeSessionOpened, vocab.SessionOpened{Remote: "r", URL: "http://127.0.0.1:9/mcp", Generation: 1, ProtocolVersion: "2025-11-25"})
	l.add(vocab.TypeCallPrepared, vocab.CallPrepared{EffectID: "e1", TaskID: "a", Attempt: 1, Tool: "t", Idempotency: "idempotent"})
	l.frame("out", "request", "tools/call", 3, 1, "a", "e1", `{"params":{}}`)
	l.add(vocab.TypeCallError, vocab.CallError{EffectID: "e1", Kind: "timeout", Message: "no answer"})
	l.add(vocab.TypeCallTransition, vocab.CallTransition{EffectID: "e1", From: "dispatched", To: "reconnecting"})
	l.add(vocab.TypeSessionExpired, vocab.SessionRef{Remote: "r", Generation: 1})
	l.add(vocab.TypeSessionOpened, vocab.SessionOpened{Remote: "r", URL: "http://127.0.0.1:9/mcp", Generation: 2, ProtocolVersion: "2025-11-25"})
	l.frame("out", "request", "tools/call", 5, 2, "a", "e1", `{"params":{}}`)
	l.frame("in", "response", "", 5, 2, "a", "e1", `{"jsonrpc":"2.0","id":5,"result":{"content":[]}}`)
	l.add(vocab.TypeCallTransition, vocab.CallTransition{EffectID: "e1", From: "redispatched", To: "succeeded"})
	l.add(vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: "a", Attempt: 1, State: "succeeded"})
	l.add(vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: "b", Attempt: 1, Server: "r", Tool: "t"})
	l.add(vocab.TypeCallPrepared, vocab.CallPrepared{EffectID: "e2", TaskID: "b", Attempt: 1, Tool: "t", Idempotency: "keyed"})
	l.frame("out", "request", "tools/call", 6, 2, "b", "e2", `{"params":{}}`)
	l.frame("in", "response", "", 6, 2, "b", "e2", `{"jsonrpc":"2.0","id":6,"error":{"code":-32602,"message":"bad"}}`)
	l.add(vocab.TypeCallTransition, vocab.CallTransition{EffectID: "e2", From: "dispatched", To: "failed"})
	l.add(vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: "b", Attempt: 1, State: "failed", Error: "bad"})
	l.add(vocab.TypeRunFinished, vocab.RunFinished{State: "failed", Error: "task b failed", ExitCode: 4})
	return l
}

// TestFold_RedispatchAndErrors: a redispatch is a new request span linked
// to the call's first; error.type is the transport kind, or the JSON-RPC
// code (also rpc.response.status_code); each call span carries the state
// its request led to; timings are the events' created_at.
func TestFold_RedispatchAndErrors(t *testing.T) {
	spans, pts := callLog().fold(0)
	calls := named(spans, "tools/call t")
	if len(calls) != 3 || len(spans) != 6 {
		t.Fatalf("%d spans, %d tools/call", len(spans), len(calls))
	}
	first, again, bad := calls[0], calls[1], calls[2]
	if attr(first, "error.type") != "timeout" || attr(first, "agentctl.call.state") != "reconnecting" || first.status.String() != "Error" {
		t.Fatalf("first: %v %v", first.attrs, first.status)
	}
	if len(again.links) != 1 || again.links[0] != first.id || attr(again, "agentctl.redispatch") != "true" || attr(again, "agentctl.call.state") != "succeeded" || attr(again, "error.type") != "" {
		t.Fatalf("redispatch: %v links %v", again.attrs, again.links)
	}
	if attr(bad, "error.type") != "-32602" || attr(bad, "rpc.response.status_code") != "-32602" || attr(bad, "agentctl.idempotency") != "keyed" {
		t.Fatalf("json-rpc error: %v", bad.attrs)
	}
	if d := again.end.Sub(again.start); d != 10*time.Millisecond {
		t.Fatalf("redispatch lasted %s, want the 10ms between its events", d)
	}
	ops, sessions := 0, 0
	for _, p := range pts {
		if p.session {
			sessions++
		} else {
			ops++
		}
	}
	if ops != 3 || sessions != 2 {
		t.Fatalf("%d operation and %d session points, want 3 and 2", ops, sessions)
	}
}

// TestFold_MarkSkipsExported: a fold that starts with a mark hands out only
// what ends after it, so the spans of two folds split at any seq are each
// handed out once.
func TestFold_MarkSkipsExported(t *testing.T) {
	l := callLog()
	all, _ := l.fold(0)
	for mark := int64(0); mark <= int64(len(l.evs)); mark++ {
		before := 0
		for _, s := range all {
			if s.endSeq <= mark {
				before++
			}
		}
		after, _ := l.fold(mark)
		if before+len(after) != len(all) {
			t.Fatalf("mark %d: %d spans before it + %d after != %d", mark, before, len(after), len(all))
		}
	}
}

// TestFold_BoundsText: workflow and remote text is sanitized and cut; tool
// names are bounded in length and in number per run.
func TestFold_BoundsText(t *testing.T) {
	l := newLog("run-2")
	l.add(vocab.TypeRunCreated, vocab.RunCreated{RunID: "run-2", Workflow: "w\x1b[31m\u202e" + strings.Repeat("x", 300)})
	for i := 0; i < maxToolNames+6; i++ {
		task := fmt.Sprint("t", i)
		l.add(vocab.TypeTaskStarted, vocab.TaskStarted{TaskID: task, Attempt: 1, Tool: fmt.Sprint("tool-", i, strings.Repeat("y", 100))})
		l.add(vocab.TypeTaskFinished, vocab.TaskFinished{TaskID: task, Attempt: 1, State: "failed", Error: "boom\x07\u2066" + strings.Repeat("z", 500)})
	}
	l.add(vocab.TypeRunFinished, vocab.RunFinished{State: "failed", Error: "x"})
	spans, _ := l.fold(0)
	tools := map[string]bool{}
	for _, s := range spans {
		for _, v := range []string{s.name, s.statusMessage, attr(s, "gen_ai.tool.name")} {
			if strings.ContainsAny(v, "\x1b\x07\u202e\u2066") || utf8.RuneCountInString(v) > maxText {
				t.Fatalf("unbounded or unsanitized text %q", v)
			}
		}
		if n := attr(s, "gen_ai.tool.name"); n != "" {
			if utf8.RuneCountInString(n) > maxToolName {
				t.Fatalf("tool name %q", n)
			}
			tools[n] = true
		}
	}
	if len(tools) != maxToolNames+1 || !tools["_other"] {
		t.Fatalf("%d distinct tool names, want %d and _other", len(tools), maxToolNames+1)
	}
}

func TestParseTraceparent(t *testing.T) {
	for s, ok := range map[string]bool{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":     true,
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz": true, // a later version, read as 00
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz": false,
		"ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01":     false,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01":     false,
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01":     false,
		"00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01":      false,
		"": false, "garbage": false,
	} {
		if _, got := ParseTraceparent(s); got != ok {
			t.Errorf("ParseTraceparent(%q) ok = %v, want %v", s, got, ok)
		}
	}
}

func TestFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		name            string
		getenv          func(string) string
		traces, metrics bool
		proto           string
		err             bool
	}{
		{"unset", env(), false, false, "", false},
		{"base", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"), true, true, "http/protobuf", false},
		{"traces only", env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"), true, false, "http/protobuf", false},
		{"grpc", env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"), true, true, "grpc", false},
		{"metrics none", env("OTEL_EXPORTER_OTLP_ENDPOINT", "x", "OTEL_METRICS_EXPORTER", "none"), true, false, "http/protobuf", false},
		{"disabled", env("OTEL_EXPORTER_OTLP_ENDPOINT", "x", "OTEL_SDK_DISABLED", "TRUE"), false, false, "", false},
		{"json", env("OTEL_EXPORTER_OTLP_ENDPOINT", "x", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"), false, false, "", true},
	} {
		cfg, err := FromEnv(c.getenv)
		if (err != nil) != c.err {
			t.Fatalf("%s: err %v", c.name, err)
		}
		if c.err {
			if !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_PROTOCOL") {
				t.Fatalf("%s: %v does not name the variable", c.name, err)
			}
			continue
		}
		if !c.traces && !c.metrics {
			if cfg != nil {
				t.Fatalf("%s: telemetry on", c.name)
			}
			continue
		}
		if cfg == nil || cfg.Traces != c.traces || cfg.Metrics != c.metrics || cfg.TracesProtocol != c.proto || cfg.FlushTimeout != DefaultFlushTimeout {
			t.Fatalf("%s: %+v", c.name, cfg)
		}
	}
}
