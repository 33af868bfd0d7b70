package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/agentctl/agentctl/projector/report"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
)

// hostile is remote text that would be markup, script, a comment or
// reordered text if any of it reached the page unescaped.
const hostile = `<script>alert(1)</script></style><style>body{display:none}</style>` +
	`<a href="javascript:alert(2)">x</a><!-- c --><img src=x onerror=alert(3)>` + "\u202eevil"

// reportWorkflow writes a workflow with one task per tool, in order, each
// calling its tool on url with the idempotency class given.
func reportWorkflow(t *testing.T, url string, tasks ...[2]string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: report-test}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
    local: {url: %q, timeoutSeconds: 30}
  actions:
    pure: {kind: mcp.call, idempotency: pure}
    idempotent: {kind: mcp.call, idempotency: idempotent}
    unknown: {kind: mcp.call, idempotency: unknown}
  tasks:
`, url)
	for _, tk := range tasks {
		fmt.Fprintf(&b, "    - {id: %s, uses: action:%s, with: {server: local, tool: %s, arguments: {n: 1}}}\n", tk[0], tk[1], tk[0])
	}
	path := filepath.Join(t.TempDir(), "report.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// runID runs the CLI and returns the run id of its JSON envelope, checking
// the exit code.
func runFor(t *testing.T, wantCode int, args ...string) string {
	t.Helper()
	out, stderr, code := cli(t, append(args, "--output", "json")...)
	if code != wantCode {
		t.Fatalf("%v: exit %d, want %d: %s", args, code, wantCode, stderr)
	}
	// A failed run still prints its RunResult on stdout.
	id, err := decodeRunID(out)
	if err != nil {
		t.Fatalf("%v: %v:\n%s\n(stderr %s)", args, err, out, stderr)
	}
	return id
}

// htmlReport runs inspect --html -o - and returns the page.
func htmlReport(t *testing.T, db, runID string) string {
	t.Helper()
	out, stderr, code := cli(t, "inspect", runID, "--db", db, "--html", "-o", "-")
	if code != 0 {
		t.Fatalf("inspect --html exit %d: %s", code, stderr)
	}
	return out
}

// TestCLI_ReportUntrustedTextStaysText: a server whose tool description,
// result and error text are markup, script, a javascript: URL, a comment
// and a bidi override: the page parses into no element, attribute or
// comment of theirs, and holds every one of those strings as text.
func TestCLI_ReportUntrustedTextStaysText(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{},
		mcptest.ToolDef{Name: "show", Description: hostile, Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text(hostile), StructuredContent: map[string]any{"text": hostile}}, nil
		}},
		mcptest.ToolDef{Name: "boom", Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return nil, errors.New(hostile)
		}})
	db := filepath.Join(t.TempDir(), "a.db")
	runID := runFor(t, 4, "run", reportWorkflow(t, srv.URL, [2]string{"show", "pure"}, [2]string{"boom", "pure"}), "--db", db)
	page := htmlReport(t, db, runID)
	shown := inertText(t, page)
	for _, want := range []string{"<script>alert(1)</script>", "</style><style>body{display:none}</style>", `<a href="javascript:alert(2)">`,
		"<!-- c -->", "<img src=x onerror=alert(3)>", "\ufffdevil"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the page's text lacks %q", want)
		}
	}
	// The error reached the task table and the call, as text.
	if strings.Count(shown, "onerror=alert(3)") < 3 {
		t.Errorf("hostile text shown %d times, want the description, the output and the error", strings.Count(shown, "onerror=alert(3)"))
	}
}

// TestCLI_ReportUntrustedStatusMessage: a server that cancels its MCP task
// with a status message of markup, script, a comment and a bidi override:
// the message reaches the call's path and the task's error as text only.
func TestCLI_ReportUntrustedStatusMessage(t *testing.T) {
	tool := researchTool()
	tool.Handler = func(ctx context.Context, _ *mcptest.Call) (*mcptest.Result, error) {
		mcptest.SetTaskStatus(ctx, mcptest.TaskCancelled, hostile)
		return &mcptest.Result{Content: mcptest.Text("done"), StructuredContent: map[string]any{"done": true}}, nil
	}
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 1}}, tool)
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", researchWorkflow(t, srv.URL, "at_most_once"), "--db", db, "--output", "json")
	if code == 0 {
		t.Fatalf("run of a task the server cancelled: exit 0\n%s%s", out, stderr)
	}
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs %v", ids)
	}
	shown := inertText(t, htmlReport(t, db, ids[0]))
	for _, want := range []string{"<script>alert(1)</script>", "<!-- c -->", "<img src=x onerror=alert(3)>", "\ufffdevil"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the page's text lacks the status message's %q", want)
		}
	}
	if n := strings.Count(shown, "onerror=alert(3)"); n < 2 {
		t.Errorf("the status message shown %d times, want in the call's path and the task's error", n)
	}
}

// inertText asserts that page holds remote text only as text: no raw bidi
// override, no script, comment, active element or attribute, one style
// element (the page's own, with no remote CSS in it) and one CSP meta tag;
// it returns the page's text outside its style element.
func inertText(t *testing.T, page string) string {
	t.Helper()
	if strings.ContainsRune(page, '\u202e') {
		t.Error("the page holds a raw U+202E")
	}
	if strings.Contains(strings.ToLower(page), "<script") {
		t.Error("the page source holds <script")
	}
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	var styles, csp int
	for n := range doc.Descendants() {
		switch n.Type {
		case html.CommentNode:
			t.Errorf("comment node %q", n.Data)
		case html.TextNode:
			if n.Parent != nil && n.Parent.Data == "style" {
				if strings.Contains(n.Data, "display:none") {
					t.Error("remote CSS inside the page's style element")
				}
				continue
			}
			text.WriteString(n.Data)
		case html.ElementNode:
			switch n.Data {
			case "script", "iframe", "img", "a", "object", "embed", "link", "base", "form", "foreignObject":
				t.Errorf("element <%s> in the page", n.Data)
			case "style":
				styles++
			}
			for _, a := range n.Attr {
				if strings.HasPrefix(strings.ToLower(a.Key), "on") || strings.Contains(strings.ToLower(a.Val), "javascript:") {
					t.Errorf("attribute %s=%q on <%s>", a.Key, a.Val, n.Data)
				}
				if n.Data == "meta" && a.Key == "http-equiv" && a.Val == "Content-Security-Policy" {
					csp++
					if c := attr(n, "content"); c != report.CSP {
						t.Errorf("CSP = %q, want %q", c, report.CSP)
					}
				}
			}
		}
	}
	if styles != 1 || csp != 1 {
		t.Errorf("%d style elements and %d CSP meta tags, want 1 and 1", styles, csp)
	}
	return text.String()
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// textOf returns the text of the page's nodes, outside its style element,
// with white space collapsed (as a browser shows it).
func textOf(t *testing.T, page string) string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for n := range doc.Descendants() {
		if n.Type == html.TextNode && (n.Parent == nil || n.Parent.Data != "style") {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

// mixedRun records a run of three tasks against mcptest: prep (progress
// notifications), flaky (its session lost once: redispatched, then
// succeeded) and risky (unknown class, session lost: uncertain, exit 3).
func mixedRun(t *testing.T) (db, runID string) {
	t.Helper()
	prep := chattyTool()
	prep.Name = "prep"
	flaky, risky := actTool(), actTool()
	flaky.Name, risky.Name = "flaky", "risky"
	srv := mcptest.Start(t, mcptest.Options{}, prep, flaky, risky)
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "flaky", Status: http.StatusNotFound, Nth: 1})
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Tool: "risky", Status: http.StatusNotFound, Nth: 1})
	db = filepath.Join(t.TempDir(), "a.db")
	runID = runFor(t, 3, "run", reportWorkflow(t, srv.URL, [2]string{"prep", "idempotent"}, [2]string{"flaky", "idempotent"}, [2]string{"risky", "unknown"}), "--db", db)
	if got := srv.Stats().Calls; got["prep"] != 1 || got["flaky"] != 2 || got["risky"] != 1 {
		t.Fatalf("server saw tools/call %v, want prep once, flaky twice, risky once", got)
	}
	return db, runID
}

// TestCLI_ReportUncertainAndRedispatch: the report of a run with a
// redispatch and an uncertain call shows both state machine paths, the
// budgets, and the reconcile commands exactly as the CLI prints them; the
// default file is RUN_ID.html in the current directory.
func TestCLI_ReportUncertainAndRedispatch(t *testing.T) {
	db, runID := mixedRun(t)
	dir := t.TempDir()
	t.Chdir(dir)
	out, stderr, code := cli(t, "inspect", runID, "--db", db, "--html")
	if code != 0 || !strings.Contains(out, runID+".html") || !strings.Contains(out, "chain verified") {
		t.Fatalf("inspect --html: exit %d %s %s", code, out, stderr)
	}
	b, err := os.ReadFile(filepath.Join(dir, runID+".html"))
	if err != nil {
		t.Fatal(err)
	}
	if page := htmlReport(t, db, runID); page != string(b) {
		t.Error("the file and -o - differ")
	}
	shown := textOf(t, string(b))
	effects := listEffects(t, db, runID)
	var uncertain string
	for _, e := range effects {
		if e["status"] == "uncertain" {
			uncertain = e["effectId"].(string)
		}
	}
	if uncertain == "" {
		t.Fatalf("no uncertain call in %v", effects)
	}
	for _, c := range workflow.ReconcileCommands(runID, uncertain) {
		if !strings.Contains(shown, c) {
			t.Errorf("the page lacks the command %q", c)
		}
	}
	for _, want := range []string{"redispatched from reconnecting on reconnected", "reconnecting from dispatched on fail_ambiguous",
		"uncertain from dispatched on fail_ambiguous", "1 used of a budget of 1", "0 used of a budget of 0 (unknown calls are never sent twice)",
		"verified — ", "reconnects local 1"} {
		if !strings.Contains(shown, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	// The commands work as printed: the not-applied verdict is accepted.
	cmd := strings.Fields(strings.Replace(workflow.ReconcileCommands(runID, uncertain)[1], `"..."`, "checked", 1))
	if _, stderr, code := cli(t, append(cmd[1:], "--db", db)...); code != 0 {
		t.Fatalf("%v: exit %d %s", cmd, code, stderr)
	}
	if strings.Contains(htmlReport(t, db, runID), "settle it with one of") {
		t.Error("a reconciled call still shows the reconcile commands")
	}
	// -o without --html is refused.
	if _, stderr, code := cli(t, "inspect", runID, "--db", db, "-o", "x.html"); code != 2 || !strings.Contains(stderr, "needs --html") {
		t.Errorf("-o without --html: exit %d %s", code, stderr)
	}
	// -o names the file; a directory that does not exist is a usage error.
	if _, stderr, code := cli(t, "inspect", runID, "--db", db, "--html", "-o", filepath.Join(dir, "none", "r.html")); code != 2 {
		t.Errorf("-o into a missing directory: exit %d %s", code, stderr)
	}
}

// TestCLI_ReportReplayEncrypted: the report of a replay in an encrypted
// database names its source run and verifies both chains with the key, and
// without the key fails closed (exit 5) like inspect.
func TestCLI_ReportReplayEncrypted(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, chattyTool())
	db := filepath.Join(t.TempDir(), "a.db")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	runID := runFor(t, 0, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db)
	srv.Close()
	replayID := runFor(t, 0, "replay", runID, "--db", db)
	shown := textOf(t, htmlReport(t, db, replayID))
	for _, want := range []string{"replay of " + runID, "source chain verified — run " + runID, "progress", "half way", `Outputs { "result": {`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the replay's page lacks %q", want)
		}
	}
	t.Setenv("AGENTCTL_KEY_K1", "")
	if _, stderr, code := cli(t, "inspect", replayID, "--db", db, "--html", "-o", "-"); code != 5 || !strings.Contains(stderr, "AGENTCTL_KEY_K1") {
		t.Fatalf("report without the key: exit %d %s", code, stderr)
	}
}
