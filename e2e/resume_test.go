package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/internal/tspeer"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
)

// cuttingProxy is a loopback proxy to upstream that ends the SSE response of
// the first tools/call after it has passed `after` progress notifications,
// as a dropped connection would. Everything else (including the client's
// GET with Last-Event-ID) passes through untouched.
func cuttingProxy(tb testing.TB, upstream string, after int) (string, *atomic.Int64) {
	tb.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		tb.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1
	var calls, cuts atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !isToolsCall(tb, r) || calls.Add(1) != 1 {
			rp.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		req, err := http.NewRequestWithContext(r.Context(), http.MethodPost, upstream, bytes.NewReader(body))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		fl := w.(http.Flusher)
		br := bufio.NewReader(resp.Body)
		seen := 0
		for {
			line, err := br.ReadString('\n')
			if _, werr := io.WriteString(w, line); werr != nil || err != nil {
				return
			}
			if strings.HasPrefix(line, "data:") && strings.Contains(line, "notifications/progress") {
				seen++
			}
			// Cut at the blank line that ends the event.
			if strings.TrimSpace(line) == "" && seen == after {
				fl.Flush()
				cuts.Add(1)
				return
			}
			fl.Flush()
		}
	})
	hs := httptest.NewServer(h)
	tb.Cleanup(hs.Close)
	return hs.URL + u.Path, &cuts
}

// TestTSEverything_ResumeAfterCut: the response stream of a long-running
// call is cut after two progress notifications. agentctl resumes it with
// GET + Last-Event-ID against the reference server's event store: the rest
// of the progress and the result arrive, and the request is sent only once
// (resuming is not resending, legal even for at_most_once).
func TestTSEverything_ResumeAfterCut(t *testing.T) {
	proxy, cuts := cuttingProxy(t, tspeer.Start(t), 2)
	res, db := runWorkflow(t, context.Background(), workflowYAML(proxy,
		step{id: "op", tool: "trigger-long-running-operation", idem: "at_most_once", args: "{duration: 1.2, steps: 4}"}), nil)
	if cuts.Load() != 1 {
		t.Fatalf("proxy cut %d streams, want 1", cuts.Load())
	}
	if res.Err != nil {
		t.Fatalf("exit %d: %v\n%s", exitCode(res), res.Err, numbered(describe(t, db, res.RunID)))
	}
	// The log reads as one call whose stream was resumed once (the
	// mcp.resume frame, before the GET): the resumed events carry their ids,
	// and the replayed ones were not recorded twice.
	call := succeededCall(4)
	call = slices.Insert(call, slices.Index(call, "mcp.request out tools/call prepared->dispatched")+3, "mcp.resume out tools/call")
	assertEvents(t, db, res.RunID, concat(lines("run.created", "task.started op"), openSession(1), call,
		lines("task.finished op succeeded", "run.finished succeeded")))
	evs := runEvents(t, db, res.RunID)
	var resumes []events.Event
	for _, e := range evs {
		if e.Type == vocab.FramePrefix+"resume" {
			resumes = append(resumes, e)
		}
	}
	var rf vocab.Frame
	var body struct {
		LastEventID string `json:"lastEventId"`
		Attempt     int    `json:"attempt"`
	}
	if len(resumes) != 1 || resumes[0].Decode(&rf) != nil || json.Unmarshal(rf.Body, &body) != nil ||
		body.Attempt != 1 || body.LastEventID == "" || rf.EventID != body.LastEventID || rf.Dir != "out" {
		t.Fatalf("resume frames %+v (body %s)", resumes, rf.Body)
	}

	// The replay reproduces the resumed run from its evidence.
	rp, err := replay.Prepare(context.Background(), db, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(context.Background(), rp.Workflow, rp.Inputs,
		workflow.RunOptions{Mode: "replay", SourceRunID: res.RunID})
	if err != nil || rep.Err != nil {
		t.Fatalf("replay: %v / %v", err, rep.Err)
	}
	if got, want := testkit.EvidenceGroups(describe(t, db, rep.RunID)), testkit.EvidenceGroups(describe(t, db, res.RunID)); !slices.Equal(got, want) {
		t.Fatalf("replay log:\n%s\nsource log:\n%s", numbered(got), numbered(want))
	}
	assertProgress(t, evs, 4, "")
	ids := map[string]bool{}
	for _, f := range frames(t, evs, "notifications/progress") {
		if f.EventID == "" || ids[f.EventID] {
			t.Fatalf("progress frame with missing or repeated SSE event id %q", f.EventID)
		}
		ids[f.EventID] = true
	}
}
