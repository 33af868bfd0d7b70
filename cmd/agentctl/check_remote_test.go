package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// checkHeader is the start of every workflow of these tests: line 1 to 9,
// so that the tasks start on line 10 and the expected positions are stable.
const checkHeader = `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: check-demo}
spec:
  policy:
    networkAllowlist: [127.0.0.1]
    environmentAllowlist: [AGENTCTL_CHECK_TOKEN]
    network: {allowedSchemes: [http], allowPrivate: true}
  mcpServers:
`

// writeCheckWorkflow writes checkHeader, the remote "local" at url with
// more keys, and body (actions, tasks, outputs) to wf.yaml in a new directory.
func writeCheckWorkflow(t *testing.T, url, serverKeys, body string) string {
	t.Helper()
	src := checkHeader + "    local: {url: \"" + url + "\"" + serverKeys + "}\n" + body
	p := filepath.Join(t.TempDir(), "wf.yaml")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const lookupBody = `  actions:
    lookup: {kind: mcp.call, idempotency: idempotent}
  tasks:
    - id: find
      uses: action:lookup
      with: {server: local, tool: search, arguments: {q: "${{ inputs.q }}"}}
    - id: fetch
      uses: action:lookup
      with: {server: local, tool: get, arguments: {id: "${{ tasks.find.output.id }}"}}
  outputs:
    title: "${{ tasks.fetch.output.title }}"
`

// TestCLI_CheckRemote_Findings: each kind of finding, one workflow each,
// against the go-sdk demo server (or the mcptest server where the demo
// server has no such tool): the exact line, exit 2.
func TestCLI_CheckRemote_Findings(t *testing.T) {
	_, demo := demotest.StartTest(t, demoserver.Options{})
	// One tool per page: "quick" is on the third, so the check lists every page.
	texty := mcptest.Start(t, mcptest.Options{PageSize: 1},
		mcptest.ToolDef{Name: "say"},
		mcptest.ToolDef{Name: "long", Execution: json.RawMessage(`{"taskSupport":"required"}`)},
		mcptest.ToolDef{Name: "quick", Execution: json.RawMessage(`{"taskSupport":"forbidden"}`)})
	cases := []struct {
		name, url, serverKeys, body string
		want                        string // the finding's line after "FILE:"
	}{
		{"unknown_tool", demo, "", strings.Replace(lookupBody, "tool: get", "tool: gte", 1),
			`19:35: unknown_tool: tool "gte" is not on server local; did you mean "get"?`},
		{"invalid_arguments", demo, "", `  actions:
    a: {kind: mcp.call, idempotency: pure}
  tasks:
    - id: count
      uses: action:a
      with: {server: local, tool: analyze, arguments: {text: "${{ inputs.text }}", steps: 50}}
`, `16:91: invalid_arguments: tool "analyze", argument /steps: maximum: got 50, want 20`},
		{"output_path", demo, "", strings.Replace(lookupBody, "output.title", "output.titel", 1),
			`21:13: output_path: template ${{ tasks.fetch.output.titel }}: tool "get" of task fetch: output has no property "titel" in the tool's outputSchema (declared: body, id, title); did you mean "title"?`},
		{"output_path_text_only", texty.URL, "", `  actions:
    a: {kind: mcp.call, idempotency: pure}
  tasks:
    - id: greet
      uses: action:a
      with: {server: local, tool: say}
  outputs:
    said: "${{ tasks.greet.output.text }}"
`, `18:12: output_path: template ${{ tasks.greet.output.text }}: tool "say" of task greet: the tool declares no outputSchema, so output is the result's content array; .text is not an index (use output[0].text for the first text block)`},
		{"task_support_required", texty.URL, "", `  actions:
    a: {kind: mcp.call, idempotency: at_most_once}
  tasks:
    - id: slow
      uses: action:a
      with: {server: local, tool: long}
`, `16:35: task_support: tool "long" requires a task (execution.taskSupport = required) but server local does not advertise tasks for tools/call; the call would fail before sending`},
		{"task_support_forbidden", texty.URL, "", `  actions:
    a: {kind: mcp.call, idempotency: at_most_once, task: true}
  tasks:
    - id: fast
      uses: action:a
      with: {server: local, tool: quick}
`, `16:35: task_support: action "a" asks for a task (task: true) but tool "quick" does not support tasks (execution.taskSupport absent or forbidden); it would be called directly, without a task`},
		{"unset_secret", demo, ", headers: {authorization: {env: AGENTCTL_CHECK_TOKEN}}", lookupBody,
			`10:79: unset_secret: secret env:AGENTCTL_CHECK_TOKEN (header authorization of remote local) is empty or unset in this environment; set it and run again`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("AGENTCTL_CHECK_TOKEN", "")
			wf := writeCheckWorkflow(t, c.url, c.serverKeys, c.body)
			db := filepath.Join(t.TempDir(), "a.db")
			if _, stderr, code := cli(t, "check", wf); code != 0 {
				t.Fatalf("offline check: exit %d: %s", code, stderr)
			}
			out, stderr, code := cli(t, "check", "--remote", wf, "--db", db)
			if code != 2 {
				t.Fatalf("exit %d, want 2\nstdout: %s\nstderr: %s", code, out, stderr)
			}
			if got, want := out, wf+":"+c.want+"\n"; got != want {
				t.Errorf("stdout:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// TestCLI_CheckRemote_CleanIsRecorded: a clean file exits 0, calls no
// tool, and is recorded as a run of mode check (the session and its
// tools/list frames, as a run records them); inspect and runs list show
// the mode, resume and replay refuse it with a message saying why.
func TestCLI_CheckRemote_CleanIsRecorded(t *testing.T) {
	srv, demo := demotest.StartTest(t, demoserver.Options{})
	wf := writeCheckWorkflow(t, demo, "", lookupBody)
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "check", "--remote", wf, "--db", db)
	if code != 0 {
		t.Fatalf("exit %d: %s%s", code, out, stderr)
	}
	if want := wf + ": ok against 1 server(s) (check-demo, 2 tasks)\n"; out != want {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	for _, tool := range demoserver.ToolNames {
		if n := srv.Calls(tool); n != 0 {
			t.Errorf("check called %s %d times", tool, n)
		}
	}
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	id := ids[0]
	evs, err := openLog(t, db).Events(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range evs {
		s := e.Stream + " " + e.Type
		if e.Type == vocab.FramePrefix+"request" {
			var f vocab.Frame
			if err := e.Decode(&f); err != nil {
				t.Fatal(err)
			}
			s += " " + f.Method
		}
		got = append(got, s)
	}
	want := []string{
		"run run.created",
		"task/check-local/1 task.started",
		"session/local/1 mcp.request initialize",
		"session/local/1 mcp.response",
		"session/local/1 mcp.notification",
		"session/local/1 session.opened",
		"session/local/1 mcp.request tools/list",
		"session/local/1 mcp.response",
		"session/local/1 session.catalog",
		"task/check-local/1 task.finished",
		"run run.finished",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("events:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	out, stderr, code = cli(t, "inspect", id, "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("inspect: exit %d: %s", code, stderr)
	}
	var ins struct {
		Data struct {
			Run struct {
				Mode  string `json:"mode"`
				State string `json:"state"`
			} `json:"run"`
			ProtocolSessions []json.RawMessage `json:"protocolSessions"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &ins); err != nil {
		t.Fatal(err)
	}
	if ins.Data.Run.Mode != "check" || ins.Data.Run.State != "succeeded" || len(ins.Data.ProtocolSessions) != 1 {
		t.Fatalf("inspect: mode %q state %q sessions %d", ins.Data.Run.Mode, ins.Data.Run.State, len(ins.Data.ProtocolSessions))
	}
	out, _, code = cli(t, "runs", "list", "--db", db)
	if code != 0 || !regexp.MustCompile(`(?m)^[0-9a-f]{8} +check-demo +check +succeeded `).MatchString(out) {
		t.Fatalf("runs list (exit %d):\n%s", code, out)
	}
	_, stderr, code = cli(t, "resume", id, "--db", db)
	if code != 2 || !strings.Contains(stderr, "a check (check --remote) cannot be resumed; run agentctl check --remote "+wf+" again") {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	_, stderr, code = cli(t, "replay", id, "--db", db)
	if code != 2 || !strings.Contains(stderr, "the run is a check (check --remote), which lists tools and calls none: there is nothing to replay") {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	if ids := runIDs(t, db); len(ids) != 1 {
		t.Fatalf("resume or replay recorded a run: %v", ids)
	}
}

// TestCLI_CheckRemote_Unreachable: a server that cannot be reached ends
// the check as it would end a run (transport loss: exit 6), recorded.
func TestCLI_CheckRemote_Unreachable(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{})
	url := srv.URL
	srv.Close() // a port nothing listens on any more
	wf := writeCheckWorkflow(t, url, "", lookupBody)
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "check", "--remote", wf, "--db", db, "--output", "json")
	if code != 6 {
		t.Fatalf("exit %d, want 6: %s%s", code, out, stderr)
	}
	var env struct {
		OK   bool `json:"ok"`
		Data struct {
			RunID      string `json:"runId"`
			State      string `json:"state"`
			ExitCode   int    `json:"exitCode"`
			ErrorClass string `json:"errorClass"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if env.OK || env.Data.State != "failed" || env.Data.ExitCode != 6 || env.Data.ErrorClass != "transport_loss" {
		t.Fatalf("result: %+v", env)
	}
	if ids := runIDs(t, db); len(ids) != 1 || ids[0] != env.Data.RunID {
		t.Fatalf("runs %v, want the check's %s", ids, env.Data.RunID)
	}
}

// TestCLI_RunTemplateErrorNamesPosition: a template path the output does
// not have fails the task at run time with the file:line:col of the
// template, before anything is sent for that task; check --remote finds
// it beforehand.
func TestCLI_RunTemplateErrorNamesPosition(t *testing.T) {
	srv, demo := demotest.StartTest(t, demoserver.Options{})
	wf := writeCheckWorkflow(t, demo, "", strings.Replace(lookupBody, "tasks.find.output.id", "tasks.find.output.ident", 1))
	db := filepath.Join(t.TempDir(), "a.db")
	_, stderr, code := cli(t, "run", wf, "--input", "q=mcp", "--db", db)
	if code != 4 {
		t.Fatalf("exit %d, want 4: %s", code, stderr)
	}
	want := "agentctl: task fetch: " + wf + `:19:57: spec.tasks[1].with.arguments.id: template "${{ tasks.find.output.ident }}": key "ident" not found in tasks.find.output (keys: id, score, title)` + "\n"
	if !strings.Contains(stderr, want) {
		t.Fatalf("stderr:\n%s\nwant a line:\n%s", stderr, want)
	}
	if srv.Calls("search") != 1 || srv.Calls("get") != 0 {
		t.Fatalf("calls: search %d get %d, want 1 and 0", srv.Calls("search"), srv.Calls("get"))
	}
	out, _, code := cli(t, "check", "--remote", wf, "--db", db)
	wantFinding := wf + `:19:57: output_path: template ${{ tasks.find.output.ident }}: tool "search" of task find: output has no property "ident" in the tool's outputSchema (declared: id, score, title)` + "\n"
	if code != 2 || out != wantFinding {
		t.Fatalf("check --remote: exit %d:\n%s\nwant:\n%s", code, out, wantFinding)
	}
}

// TestCLI_CheckRemote_CrashedCheckIsNotResumed: a check killed after its
// tools/list is left as recorded: a worker does not take it up (its
// queues select mode run), resume refuses it.
func TestCLI_CheckRemote_CrashedCheckIsNotResumed(t *testing.T) {
	_, demo := demotest.StartTest(t, demoserver.Options{})
	wf := writeCheckWorkflow(t, demo, "", lookupBody)
	db := filepath.Join(t.TempDir(), "a.db")
	cmd := subprocess(t, "check", "--remote", wf, "--db", db)
	cmd.Env = append(cmd.Env, "AGENTCTL_TEST_CRASH_AFTER=session.catalog")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("check with a crash point did not die:\n%s", out)
	}
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	before := describe(t, db, ids[0])
	if before[len(before)-1] != "session.catalog" {
		t.Fatalf("crashed check's log ends %v", before)
	}
	if _, stderr, code := cli(t, "worker", "--drain", "--db", db); code != 0 {
		t.Fatalf("worker: exit %d: %s", code, stderr)
	}
	if _, stderr, code := cli(t, "resume", ids[0], "--db", db); code != 2 || !strings.Contains(stderr, "a check (check --remote) cannot be resumed") {
		t.Fatalf("resume: exit %d: %s", code, stderr)
	}
	if after := describe(t, db, ids[0]); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("the crashed check changed:\n%s\nwas:\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
}
