package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/html"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// concurrentWorkflow writes a workflow of three tasks that may all start at
// once (needs: []): prep (idempotent), flaky (idempotent) and risky
// (unknown), each calling the tool of its name on url.
func concurrentWorkflow(t *testing.T, url string) string {
	t.Helper()
	src := fmt.Sprintf(`apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: report-concurrent}
spec:
  concurrency: 4
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    idempotent: {kind: mcp.call, idempotency: idempotent}
    unknown: {kind: mcp.call, idempotency: unknown}
  tasks:
    - {id: prep, uses: action:idempotent, needs: [], with: {server: local, tool: prep, arguments: {n: 1}}}
    - {id: flaky, uses: action:idempotent, needs: [], with: {server: local, tool: flaky, arguments: {n: 1}}}
    - {id: risky, uses: action:unknown, needs: [], with: {server: local, tool: risky, arguments: {n: 1}}}
`, url)
	path := filepath.Join(t.TempDir(), "concurrent.yaml")
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// concurrentRun records in db (a file or a PostgreSQL URL) a run whose
// tasks overlap by construction: prep, flaky and risky start together;
// flaky's first tools/call is answered 404 (session lost: it reconnects and
// is redispatched, then succeeds), risky's too (unknown class: it ends
// uncertain, exit 3), and the server holds prep's call, after a progress
// notification, until flaky's redispatched call has reached it. So prep's
// attempt spans flaky's redispatch: the tasks ran at the same time, or the
// run times out. live, when not nil, is called while prep is held (the run
// not finished) with the run's id.
func concurrentRun(t *testing.T, db string, live func(runID string)) string {
	t.Helper()
	flakyCalled, prepHeld, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var flakyOnce, heldOnce sync.Once
	prep, flaky, risky := actTool(), actTool(), actTool()
	prep.Name, flaky.Name, risky.Name = "prep", "flaky", "risky"
	prep.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		if err := c.Progress(1, 2, "waiting for flaky"); err != nil {
			return nil, err
		}
		wait := func(ch chan struct{}) error {
			select {
			case <-ch:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err := wait(flakyCalled); err != nil {
			return nil, err
		}
		heldOnce.Do(func() { close(prepHeld) })
		if err := wait(release); err != nil {
			return nil, err
		}
		if err := c.Progress(2, 2, "done"); err != nil {
			return nil, err
		}
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	flakyHandler := flaky.Handler
	flaky.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		flakyOnce.Do(func() { close(flakyCalled) })
		return flakyHandler(ctx, c)
	}
	srv := mcptest.Start(t, mcptest.Options{}, prep, flaky, risky)
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "flaky", Status: http.StatusNotFound, Nth: 1})
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "risky", Status: http.StatusNotFound, Nth: 1})

	var out, stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- execute(context.Background(), []string{"run", concurrentWorkflow(t, srv.URL), "--db", db, "--output", "json"}, &out, &stderr)
	}()
	if live != nil {
		select {
		case <-prepHeld:
		case code := <-done:
			t.Fatalf("the run ended (exit %d) before prep was held: %s", code, stderr.String())
		}
		ids := runIDs(t, db)
		if len(ids) != 1 {
			t.Fatalf("runs in the log: %v", ids)
		}
		live(ids[0])
	}
	close(release)
	if code := <-done; code != 3 {
		t.Fatalf("run: exit %d, want 3 (risky uncertain): %s", code, stderr.String())
	}
	if got := srv.Stats().Calls; got["prep"] != 1 || got["flaky"] != 2 || got["risky"] != 1 {
		t.Fatalf("server saw tools/call %v, want prep once, flaky twice, risky once", got)
	}
	return jsonRunID(t, out.String())
}

// pageBar is one attempt's bar as the page draws it.
type pageBar struct {
	state      string
	start, end int64 // µs from the run's first event
}

// laneBars reads the timeline's lanes from a page or a rendered DOM: the
// task of each lane, in order, and its bars.
func laneBars(t *testing.T, page string) (order []string, bars map[string][]pageBar) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	bars = map[string][]pageBar{}
	for n := range doc.Descendants() {
		if n.Type != html.ElementNode || n.Data != "g" || attr(n, "class") != "lane" {
			continue
		}
		task := attr(n, "data-task")
		order = append(order, task)
		for b := range n.Descendants() {
			class, ok := strings.CutPrefix(attr(b, "class"), "bar ")
			if b.Type != html.ElementNode || b.Data != "rect" || !ok {
				continue
			}
			s, err1 := strconv.ParseInt(attr(b, "data-start-us"), 10, 64)
			e, err2 := strconv.ParseInt(attr(b, "data-end-us"), 10, 64)
			if err1 != nil || err2 != nil || e < s {
				t.Fatalf("lane %s: bar %v: %v %v", task, b.Attr, err1, err2)
			}
			bars[task] = append(bars[task], pageBar{state: class, start: s, end: e})
		}
	}
	return order, bars
}

// checkOverlap asserts that the one bar of lane a and the one bar of each
// lane in others overlap in time.
func checkOverlap(t *testing.T, bars map[string][]pageBar, a string, others ...string) {
	t.Helper()
	for _, o := range others {
		if len(bars[a]) != 1 || len(bars[o]) != 1 {
			t.Errorf("bars of %s %v and of %s %v, want one each", a, bars[a], o, bars[o])
			continue
		}
		x, y := bars[a][0], bars[o][0]
		if !(x.start < y.end && y.start < x.end) {
			t.Errorf("%s %d–%dµs and %s %d–%dµs do not overlap", a, x.start, x.end, o, y.start, y.end)
		}
	}
}

// TestCLI_ReportConcurrentLive, on SQLite and PostgreSQL: the report of a
// run whose three tasks ran at the same time, written while the run is
// still going (what is committed so far: prep's attempt open, its call
// dispatched) and after it ended: one lane per task, prep's bar overlapping
// the other two, flaky's call lost and redispatched, risky's uncertain with
// the reconcile commands, the chain verified.
func TestCLI_ReportConcurrentLive(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		db := b.DSN(t)
		runID := concurrentRun(t, db, func(runID string) {
			page := htmlReport(t, db, runID)
			if shown := textOf(t, page); !strings.Contains(shown, "not finished: what is committed so far") {
				t.Errorf("the live report does not say the run is not finished:\n%s", shown)
			}
			_, bars := laneBars(t, page)
			if p := bars["prep"]; len(p) != 1 || p[0].state != "running" {
				t.Errorf("prep's bars in the live report %v, want one running", p)
			}
			if !strings.Contains(page, `class="call dispatched"`) {
				t.Error("the live report draws no dispatched call (prep's)")
			}
		})
		page := htmlReport(t, db, runID)
		order, bars := laneBars(t, page)
		if len(order) != 3 || len(bars) != 3 {
			t.Fatalf("lanes %v, want one per task (prep, flaky, risky)", order)
		}
		checkOverlap(t, bars, "prep", "flaky", "risky")
		for task, want := range map[string]string{"prep": "succeeded", "flaky": "succeeded", "risky": "uncertain"} {
			if b := bars[task]; len(b) != 1 || b[0].state != want {
				t.Errorf("%s's bars %v, want one %s", task, b, want)
			}
		}
		for _, want := range []string{`class="m m-sent"`, `class="m m-lost"`, `class="m m-redispatch"`, `class="m m-error"`, `class="m m-result"`,
			`class="call uncertain"`, `class="call succeeded"`, `class="m m-progress"`, `class="m m-session"`} {
			if !strings.Contains(page, want) {
				t.Errorf("the timeline lacks %s", want)
			}
		}
		// Both calls whose session was lost under them show it: flaky's
		// (reconnecting) and risky's (uncertain at once).
		if n := strings.Count(page, `class="m m-lost"`); n != 2 {
			t.Errorf("%d session-lost markers, want 2 (flaky's and risky's)", n)
		}
		shown := textOf(t, page)
		// The header: the run, its workflow and digest, mode, state, exit
		// code, durations, the database (a URL with its password masked)
		// and the chain.
		for _, want := range []string{"Run " + runID + " uncertain", "workflow report-concurrent sha256:", "mode run", "state uncertain — task risky",
			"exit code 3", "started 20", "finished 20", "from the first event to the last", "calls 3 · tasks 3 · sessions 2",
			"database " + events.RedactDSN(db), "chain verified — "} {
			if !strings.Contains(shown, want) {
				t.Errorf("the report's header lacks %q", want)
			}
		}
		if u, err := url.Parse(db); err == nil && u.User != nil {
			if pw, ok := u.User.Password(); ok && strings.Contains(page, pw+"@") {
				t.Error("the report shows the database URL's password")
			}
		}
		// The sessions: both generations, the protocol, the tools' digests,
		// the loss of the first; the stream events; no outputs.
		for _, want := range []string{"local · generation 1", "local · generation 2", "protocol 2025-11-25", "reconnects local 1",
			"tool (3) schema digest description", "lost +", "Stream events", "tools/call", "Outputs None recorded."} {
			if !strings.Contains(shown, want) {
				t.Errorf("the report lacks %q", want)
			}
		}
		for _, want := range []string{"reconnecting from dispatched on fail_ambiguous", "redispatched from reconnecting on reconnected",
			"uncertain from dispatched on fail_ambiguous", "1 used of a budget of 1", "verified — "} {
			if !strings.Contains(shown, want) {
				t.Errorf("the report lacks %q", want)
			}
		}
		var uncertain string
		for _, e := range listEffects(t, db, runID) {
			if e["status"] == "uncertain" {
				uncertain = e["effectId"].(string)
			}
		}
		for _, c := range workflow.ReconcileCommands(runID, uncertain) {
			if uncertain == "" || !strings.Contains(shown, c) {
				t.Errorf("the report lacks the command %q", c)
			}
		}
	})
}
