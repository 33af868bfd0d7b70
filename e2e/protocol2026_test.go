package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
)

// pinnedYAML is a one-task workflow calling tool on url, the server pinned
// to pin, the action declared idem and answering elicitations by mode.
func pinnedYAML(url, pin, tool, idem, args, mode string) string {
	elicit := ""
	if mode != "" {
		elicit = fmt.Sprintf("\n      elicitation: {mode: %s}", mode)
	}
	return fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: e2e-2026}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    peer: {url: %q, protocolVersion: %q}
  actions:
    act:
      kind: mcp.call
      idempotency: %s%s
  tasks:
    - id: t
      uses: action:act
      with: {server: peer, tool: %s, arguments: %s}
  outputs:
    t: "${{ tasks.t.output }}"
`, url, pin, idem, elicit, tool, args)
}

// statelessOpen is the log of opening a 2026-07-28 session: server/discover
// instead of initialize, then one tools/list page.
var statelessOpen = []string{"mcp.request out server/discover", "mcp.response in", "session.opened",
	"mcp.request out tools/list", "mcp.response in", "session.catalog"}

// TestGoSDK2026_InputRequiredRun runs a call of the go-sdk v1.8.0 server's
// confirm tool (2026-07-28, stateless) for an at_most_once action: the
// input-required result is answered from the action's elicitation setting
// and the request re-issued on its own FSM path; the tool runs once. The
// replay reproduces the run from its evidence.
func TestGoSDK2026_InputRequiredRun(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{Protocol: demoserver.Protocol20260728})
	res, db := runWorkflow(t, context.Background(), pinnedYAML(url, "2026-07-28", "confirm", "at_most_once", "{item: order-7}", "defaults"), nil)
	if res.Err != nil {
		t.Fatalf("run failed (exit %d): %v", exitCode(res), res.Err)
	}
	want := concat(lines("run.created", "task.started t"), statelessOpen, lines(
		"call.prepared", "mcp.request out tools/call prepared->dispatched", "mcp.response in dispatched->input_required",
		"mcp.request out tools/call input_required->redispatched", "mcp.response in",
		"call.result redispatched->succeeded", "task.finished t succeeded", "run.finished succeeded"))
	assertEvents(t, db, res.RunID, want)
	verifyChain(t, db, res.RunID)
	if n := srv.Calls("confirm"); n != 1 {
		t.Fatalf("confirm ran %d times, want 1", n)
	}
	if got := outputString(t, res.Outputs["t"]); got != `{"confirmed":true,"item":"order-7"}` {
		t.Fatalf("output %s", got)
	}
	evs := runEvents(t, db, res.RunID)
	calls := frames(t, evs, "tools/call")
	if len(calls) != 2 || string(calls[0].ID) == string(calls[1].ID) || !strings.Contains(string(calls[1].Body), `"inputResponses":{"confirm":{"action":"accept","content":{"confirmed":true}}}`) ||
		!strings.Contains(string(calls[1].Body), `"requestState":"{\"round\":1,\"nonce\":\"c0ffee\"}"`) {
		t.Fatalf("tools/call frames %+v", calls)
	}
	for _, o := range decodeAll[vocab.SessionOpened](t, evs, vocab.TypeSessionOpened) {
		if o.ProtocolVersion != "2026-07-28" || o.SessionIDDigest != "" {
			t.Fatalf("session.opened %+v: want 2026-07-28 and no session id", o)
		}
	}

	rp, err := replay.Prepare(context.Background(), db, res.RunID)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(context.Background(), rp.Workflow, rp.Inputs,
		workflow.RunOptions{Mode: "replay", SourceRunID: res.RunID})
	if err != nil || rep.Err != nil {
		t.Fatalf("replay: %v / %v", err, rep.Err)
	}
	if got := outputString(t, rep.Outputs["t"]); got != `{"confirmed":true,"item":"order-7"}` || srv.Calls("confirm") != 1 {
		t.Fatalf("replay output %s, server count %d", got, srv.Calls("confirm"))
	}
}

// TestGoSDK2026_DeclinedInputDoesNotRun: an action without an elicitation
// setting declines; the server's confirm then answers with confirmed false.
func TestGoSDK2026_HeadersMirrored(t *testing.T) {
	srv, url := demotest.StartTest(t, demoserver.Options{Protocol: demoserver.Protocol20260728})
	res, _ := runWorkflow(t, context.Background(), pinnedYAML(url, "2026-07-28", "regional", "idempotent", `{region: "eu west", query: q}`, ""), nil)
	if res.Err != nil || srv.Calls("regional") != 1 {
		t.Fatalf("run: %v (exit %d), server count %d", res.Err, exitCode(res), srv.Calls("regional"))
	}
}

// TestGoSDK2026_PinRefused: a remote pinned to a version its server does
// not speak fails with exit 6 before any tool is called, naming both sides.
func TestGoSDK2026_PinRefused(t *testing.T) {
	for _, tc := range []struct{ server, pin, offers string }{
		{"2025-11-25", "2026-07-28", `"2025-11-25"`},
		{"2026-07-28", "2025-11-25", `"2026-07-28"`},
	} {
		t.Run(tc.pin+"@"+tc.server, func(t *testing.T) {
			srv, url := demotest.StartTest(t, demoserver.Options{Protocol: tc.server})
			res, _ := runWorkflow(t, context.Background(), pinnedYAML(url, tc.pin, "echo", "idempotent", "{message: hi}", ""), nil)
			if exitCode(res) != workflow.ExitRemote || res.Err == nil || !strings.Contains(res.Err.Error(), tc.pin) || !strings.Contains(res.Err.Error(), tc.offers) {
				t.Fatalf("exit %d, error %v; want 6 naming %s and %s", exitCode(res), res.Err, tc.pin, tc.offers)
			}
			if srv.Calls("echo") != 0 {
				t.Fatal("echo ran")
			}
		})
	}
}

// TestAuto_RecordedVersionKeptOnResume: auto probes once and records the
// version in session.opened; a resume keeps it even when the server at
// the URL now offers only the other revision (the run fails, exit 6,
// rather than change version midway).
func TestAuto_RecordedVersionKeptOnResume(t *testing.T) {
	modern := demoserver.New(demoserver.Options{Protocol: demoserver.Protocol20260728})
	legacy := demoserver.New(demoserver.Options{Protocol: "2025-11-25"})
	var h atomic.Pointer[http.Handler]
	mh := modern.Handler()
	h.Store(&mh)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { (*h.Load()).ServeHTTP(w, r) }))
	t.Cleanup(ts.Close)
	url := strings.Replace(ts.URL, "localhost", "127.0.0.1", 1) + "/mcp"

	res, db := runWorkflow(t, context.Background(), pinnedYAML(url, "auto", "fail", "idempotent", "{message: boom}", ""), nil)
	if exitCode(res) != workflow.ExitFailed {
		t.Fatalf("first run: exit %d (%v), want 4", exitCode(res), res.Err)
	}
	opened := decodeAll[vocab.SessionOpened](t, runEvents(t, db, res.RunID), vocab.TypeSessionOpened)
	if len(opened) != 1 || opened[0].ProtocolVersion != "2026-07-28" {
		t.Fatalf("session.opened %+v: want one, 2026-07-28", opened)
	}
	lh := legacy.Handler()
	h.Store(&lh)
	res2, err := (&workflow.Runner{DB: db, UserAgent: "agentctl-e2e"}).ResumeWith(context.Background(), res.RunID, workflow.ResumeOptions{RetryFailed: true})
	if err != nil {
		t.Fatal(err)
	}
	if exitCode(res2) != workflow.ExitRemote || !strings.Contains(fmt.Sprint(res2.Err), "2026-07-28") {
		t.Fatalf("resume: exit %d (%v); want 6, the recorded 2026-07-28 kept", exitCode(res2), res2.Err)
	}
	evs := describe(t, db, res.RunID)
	if slices.Contains(evs, "mcp.request out initialize") {
		t.Fatalf("the resume switched to initialize:\n%s", numbered(evs))
	}
	_ = testkit.EvidenceGroups
}
