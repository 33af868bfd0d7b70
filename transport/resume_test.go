package transport

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// resumeLog is a sink that also notes, for every "resume" frame, how many
// GETs the server had seen when the frame reached the sink.
type resumeLog struct {
	recorder
	srv        *mcptest.Server
	getsBefore []int
}

func (l *resumeLog) sink(ctx context.Context, f Frame) error {
	if f.Kind == "resume" {
		l.getsBefore = append(l.getsBefore, l.srv.Stats().Gets)
	}
	return l.recorder.sink(ctx, f)
}

type resumeBody struct {
	LastEventID       string `json:"lastEventId"`
	Attempt           int    `json:"attempt"`
	CredentialRefresh bool   `json:"credentialRefresh"`
}

func (l *resumeLog) resumes(t *testing.T) []resumeBody {
	t.Helper()
	var out []resumeBody
	for _, f := range l.all() {
		if f.Kind != "resume" {
			continue
		}
		var b resumeBody
		if err := json.Unmarshal(f.Body, &b); err != nil || f.Dir != "out" || f.Method != "tools/call" || f.EventID != b.LastEventID || b.LastEventID == "" {
			t.Fatalf("resume frame %+v (%s): %v", f, f.Body, err)
		}
		out = append(out, b)
	}
	return out
}

func toolsCalls(st mcptest.Stats) int {
	n := 0
	for _, r := range st.Requests {
		if r.HTTPMethod == "POST" && r.RPCMethod == "tools/call" {
			n++
		}
	}
	return n
}

func TestResumeLogged(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", CloseAfterPriming: true, Retry: 1, Nth: 1})
	s := connect(t, newClient(t, srv.URL, nil), nil)
	l := &resumeLog{srv: srv}
	if _, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, l.sink); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, f := range l.all() {
		kinds = append(kinds, f.Dir+" "+f.Kind)
	}
	if got := strings.Join(kinds, ", "); got != "out request, out resume, in response" {
		t.Errorf("frames = %s", got)
	}
	if r := l.resumes(t); len(r) != 1 || r[0].Attempt != 1 || r[0].CredentialRefresh {
		t.Errorf("resumes = %+v", r)
	}
	if fmt.Sprint(l.getsBefore) != "[0]" {
		t.Errorf("GETs seen by the server when each resume frame was recorded: %v, want [0]", l.getsBefore)
	}
}

// Break, resume, break, resume, break: the second resumption is the last,
// and the request is never resent.
func TestResumeBound(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", CloseAfterPriming: true, Retry: 1, Nth: 1})
	srv.Inject(mcptest.Fault{HTTPMethod: "GET", CloseAfterPriming: true, Retry: 1})
	s := connect(t, newClient(t, srv.URL, func(c *Config) { c.MaxResumeDelay = time.Millisecond }), nil)
	l := &resumeLog{srv: srv}
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, l.sink)
	e := wantKind(t, err, KindTransportLoss)
	if !e.Sent || !e.Ambiguous() || !strings.Contains(e.Error(), "gave up after 2 resumptions") {
		t.Errorf("error %v: sent %v ambiguous %v", e, e.Sent, e.Ambiguous())
	}
	st := srv.Stats()
	if st.Gets != 2 || toolsCalls(st) != 1 || st.Executed["a"] != 1 {
		t.Errorf("GETs %d tools/call POSTs %d executed %d, want 2 1 1", st.Gets, toolsCalls(st), st.Executed["a"])
	}
	var lastIDs []string
	for _, r := range st.Requests {
		if r.HTTPMethod == "GET" {
			lastIDs = append(lastIDs, r.LastEventID)
		}
	}
	if len(lastIDs) != 2 || lastIDs[0] == "" || lastIDs[0] != lastIDs[1] {
		t.Errorf("Last-Event-IDs %q: want the priming id twice", lastIDs)
	}
	r := l.resumes(t)
	if len(r) != 2 || r[0].Attempt != 1 || r[1].Attempt != 2 || r[0].LastEventID != lastIDs[0] {
		t.Errorf("resume frames %+v", r)
	}
	if fmt.Sprint(l.getsBefore) != "[0 1]" {
		t.Errorf("GETs seen when each resume frame was recorded: %v, want [0 1]", l.getsBefore)
	}
}

func TestResumeUnauthorized(t *testing.T) {
	for _, tc := range []struct {
		name    string
		times   int // GET 401s; 0 = every GET
		wantErr Kind
	}{
		{"once", 1, ""},
		{"twice", 0, KindUnauthorized},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
			srv.Inject(mcptest.Fault{RPCMethod: "tools/call", CloseAfterPriming: true, Nth: 1})
			srv.Inject(mcptest.Fault{HTTPMethod: "GET", Status: http.StatusUnauthorized, Times: tc.times})
			resolves := 0
			c := newClient(t, srv.URL, func(c *Config) {
				c.Headers = map[string]SecretRef{"Authorization": {Env: "TOKEN"}}
				c.Policy.EnvironmentAllowlist = []string{"TOKEN"}
				c.Getenv = func(string) string { resolves++; return fmt.Sprintf("Bearer tok-0000%d", resolves) }
			})
			s := connect(t, c, nil)
			before := resolves
			l := &resumeLog{srv: srv}
			res, err := s.CallTool(context.Background(), CallRequest{Tool: "a"}, l.sink)
			if tc.wantErr == "" {
				if err != nil || !strings.Contains(string(res.Content), "ok") {
					t.Fatalf("res %+v err %v", res, err)
				}
			} else {
				e := wantKind(t, err, tc.wantErr)
				if e.Status != http.StatusUnauthorized || !e.Sent || e.Ambiguous() || !e.MayHaveExecuted() {
					t.Errorf("%v: status %d sent %v ambiguous %v possibly executed %v, want 401 true false true",
						e, e.Status, e.Sent, e.Ambiguous(), e.MayHaveExecuted())
				}
				if strings.Contains(e.Error(), "tok-") {
					t.Errorf("secret in error %v", e)
				}
			}
			st := srv.Stats()
			var lastIDs, auth []string
			for _, r := range st.Requests {
				if r.HTTPMethod == "GET" {
					lastIDs = append(lastIDs, r.LastEventID)
					auth = append(auth, r.Header.Get("Authorization"))
				}
			}
			if st.Gets != 2 || toolsCalls(st) != 1 || resolves-before != 3 {
				t.Errorf("GETs %d tools/call POSTs %d resolves %d, want 2 1 3", st.Gets, toolsCalls(st), resolves-before)
			}
			if len(lastIDs) != 2 || lastIDs[0] == "" || lastIDs[0] != lastIDs[1] || auth[0] == auth[1] {
				t.Errorf("GETs with Last-Event-ID %q auth %q: want the same id with a refreshed credential", lastIDs, auth)
			}
			r := l.resumes(t)
			if len(r) != 2 || r[0].Attempt != 1 || r[0].CredentialRefresh || r[1].Attempt != 1 || !r[1].CredentialRefresh {
				t.Errorf("resume frames %+v", r)
			}
			for _, f := range l.all() {
				if strings.Contains(string(f.Body), "tok-") {
					t.Errorf("secret in frame %+v", f)
				}
			}
		})
	}
}

// TestResumeRetryWithoutData: an SSE event carrying only a retry field (no
// data, no id) sets the reconnection delay, as the SSE spec says. The
// priming event asks for an hour, the retry-only event that follows for 0:
// the client must resume at once, not after the hour (its deadline).
func TestResumeRetryWithoutData(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("a"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Nth: 1, CloseAfterPriming: true, Retry: 3_600_000, AfterPriming: []byte("retry: 0\n\n")})
	s := connect(t, newClient(t, srv.URL, func(c *Config) { c.MaxResumeDelay = time.Hour }), nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.CallTool(ctx, CallRequest{Tool: "a"}, nil); err != nil {
		t.Fatalf("call: %v (the retry-only event was ignored: the client waited for the priming event's hour)", err)
	}
	if st := srv.Stats(); st.Gets != 1 || st.Executed["a"] != 1 {
		t.Errorf("gets = %d, executed = %d; want one resumption of one execution", st.Gets, st.Executed["a"])
	}
}
