package main

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// The crash matrix at 2026-07-28. The revision is a table dimension only
// where it changes what a call does: the connection era opens with
// server/discover instead of initialize, there is no session to expire,
// and a broken response stream loses the request (no Last-Event-ID
// resumption): only the redispatch rules may issue it again, with a new
// id. So the 2026-07-28 rows are the happy path (with its stream of
// evidence and a server request) and the loss paths; argument, tool-error
// and 5xx outcomes are decided before or apart from the revision and stay
// 2025-11-25 rows only. The 2026-07-28 rows run on SQLite only: the
// backend dimension is the 2025-11-25 rows' (TestCLI_CrashMatrix). Over
// stdio (TestCLI_CrashMatrixStdio) the 2026-07-28 row is a server process
// dying mid-call, against the demo server restricted to 2026-07-28.

// stdioCrashScenarios2026 are the stdio rows at 2026-07-28 (the demo server
// restricted to it), run in TestCLI_CrashMatrixStdio: a server process that
// dies mid-call (the request is lost; the redispatch rules decide), killed
// after every commit from the request on. The session's opening at
// 2026-07-28 (server/discover) is the HTTP rows' ("ok"): over stdio it
// differs from 2025-11-25 only in that, so it is not repeated here (the
// stdio matrix is the slowest part of the suite).
func stdioCrashScenarios2026() []stdioCrashScenario {
	const analyzed = `{"result":{"steps":2,"words":3}}`
	const p = mcptest.Protocol20260728
	return []stdioCrashScenario{
		{name: "server-died-2026", protocol: p, tool: "analyze", args: `{text: "a b c", steps: 2}`, die: "analyze", from: "mcp.request out tools/call", outputs: analyzed,
			want: "call.transition reconnecting->redispatched", wantNR: "call.transition dispatched->uncertain"},
	}
}

// modernServer starts a 2026-07-28 (stateless) mcptest server serving tool
// with faults armed.
func modernServer(tool mcptest.ToolDef, faults ...mcptest.Fault) func(t *testing.T) (*mcptest.Server, string) {
	return func(t *testing.T) (*mcptest.Server, string) {
		srv := mcptest.Start(t, mcptest.Options{ProtocolVersion: mcptest.Protocol20260728}, tool)
		for _, f := range faults {
			srv.Inject(f)
		}
		return srv, srv.URL
	}
}

// lost breaks the Nth tools/call stream after the tool ran (Times: how many).
func lost(nth, times int) mcptest.Fault {
	return mcptest.Fault{RPCMethod: "tools/call", CloseAfterPriming: true, Nth: nth, Times: times}
}

func crashScenarios2026() []crashScenario {
	const p = mcptest.Protocol20260728
	return []crashScenario{
		{name: "ok", protocol: p, start: modernServer(chattyTool()),
			want: "call.transition dispatched->succeeded", wantNR: "call.transition dispatched->succeeded"},
		{name: "lost", protocol: p, start: modernServer(actTool(), lost(1, 1)), from: "mcp.request out tools/call",
			want: "call.transition reconnecting->redispatched", wantNR: "call.transition dispatched->uncertain"},
		{name: "redispatch-failed", protocol: p, redispatchOnly: true, start: modernServer(failingTool(), lost(1, 1)),
			from: "call.transition reconnecting->redispatched", want: "call.transition redispatched->failed"},
		{name: "redispatch-uncertain", protocol: p, redispatchOnly: true, start: modernServer(actTool(), lost(1, 2)),
			from: "call.transition reconnecting->redispatched", want: "call.transition redispatched->uncertain"},
	}
}

// TestCLI_CrashMatrix2026 is TestCLI_CrashMatrix against a 2026-07-28
// server: killed after every commit of a call, for every class, then
// resumed; pure/idempotent/keyed tools execute at most twice in total,
// at_most_once/unknown at most once (server-side counts); no event is lost
// or rewritten; the resumed run replays to the same exit code.
func TestCLI_CrashMatrix2026(t *testing.T) {
	t.Parallel()
	b := testkit.Backends(t)[0] // SQLite
	var mu sync.Mutex
	kills := 0
	t.Cleanup(func() { t.Logf("crash matrix 2026-07-28: %d kills", kills) })
	for _, sc := range crashScenarios2026() {
		for _, idem := range allClasses {
			if sc.redispatchOnly && !isRedispatchable(idem) {
				continue
			}
			t.Run(sc.name+"/"+idem, func(t *testing.T) {
				t.Parallel()
				ref := crashReference(t, sc, idem, b)
				if !slices.Contains(ref.lines, "mcp.request out server/discover") || slices.Contains(ref.lines, "mcp.request out initialize") {
					t.Fatalf("the reference run did not speak 2026-07-28:\n%s", strings.Join(ref.lines, "\n"))
				}
				for _, group := range ref.points {
					name := strings.NewReplacer(" ", "_", "#", "@").Replace(group[0])
					t.Run(name, func(t *testing.T) {
						t.Parallel()
						crashAndResume(t, sc, idem, group[0], ref, b)
						mu.Lock()
						kills++
						mu.Unlock()
					})
				}
			})
		}
	}
}
