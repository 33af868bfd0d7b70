package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// requests is every request srv got: refused (401) or served.
func (s *oauthServer) requests() int {
	_, unauthed := s.counts()
	return unauthed + s.mcp.Stats().Posts
}

// TestCLI_WorkerLoginPrecheck (issue 31 follow-up): a queued run whose
// server needs a login the database lacks ends failed (exit 6) at once
// when a worker claims it, naming the login command, without a request
// to the server; the worker goes on and runs the next queued run.
func TestCLI_WorkerLoginPrecheck(t *testing.T) {
	srv := newOAuthServer(t, "", "")
	db := testkit.Backends(t)[0].DSN(t)
	enableEncryption(t, db)
	wf := authWorkflow(t, srv, "{oauth: {clientId: agentctl-cli, scopes: [act]}}")
	plain := mcptest.Start(t, mcptest.Options{}, actTool())
	other := testkit.Workflow{Name: "plain", URL: plain.URL,
		Tasks: []testkit.Task{{ID: "only", Action: "act", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 1}"}}}.WriteFile(t)
	var ids []string
	for _, f := range []string{wf, other} {
		out, stderr, code := cli(t, "submit", f, "--db", db)
		if code != 0 {
			t.Fatalf("submit %s: exit %d: %s", f, code, stderr)
		}
		ids = append(ids, strings.TrimSpace(out))
	}
	out, stderr, code := cli(t, "worker", "--drain", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("worker: exit %d: %s", code, stderr)
	}
	var env struct {
		Data workerResult `json:"data"`
	}
	if err := json.Unmarshal([]byte(out), &env); err != nil || len(env.Data.Runs) != 2 {
		t.Fatalf("worker output (%v): %s", err, out)
	}
	want := "agentctl auth login -f " + wf + " local"
	for _, r := range env.Data.Runs {
		switch r.RunID {
		case ids[0]:
			if r.State != "failed" || r.Exit != 6 || r.Error == nil || !strings.Contains(*r.Error, want) {
				t.Fatalf("the run needing a login: %+v; want failed, exit 6, naming %q", r, want)
			}
		case ids[1]:
			if r.State != "succeeded" {
				t.Fatalf("the other run: %+v; want succeeded", r)
			}
		}
	}
	if got := describe(t, db, ids[0]); len(got) != 3 || got[1] != "run.started" || !strings.HasPrefix(got[2], "run.finished failed") {
		t.Fatalf("the run needing a login logged %v; want run.created, run.started, run.finished failed", got)
	}
	if n := srv.requests(); n != 0 {
		t.Fatalf("the server got %d requests from a run without its login", n)
	}
	if plain.Stats().Executed["act"] != 1 {
		t.Fatalf("the other queued run's call executed %d times, want 1", plain.Stats().Executed["act"])
	}
}

// TestCLI_ResumeLoginPrecheck (issue 31 follow-up): resuming a run whose
// server's login was removed in between fails at once (exit 6), naming
// the login command of the run's recorded workflow, without a request to
// the server and without appending to the run.
func TestCLI_ResumeLoginPrecheck(t *testing.T) {
	srv := newOAuthServer(t, "", "")
	db := testkit.Backends(t)[0].DSN(t)
	enableEncryption(t, db)
	wf := testkit.Workflow{Name: "authorized", URL: srv.URL + "/mcp",
		ServerKeys: []string{"auth: {oauth: {clientId: agentctl-cli, scopes: [act]}}"},
		Tasks:      []testkit.Task{{ID: "only", Action: "act", Idempotency: "idempotent", Tool: "no-such-tool", Arguments: "{n: 1}"}}}.WriteFile(t)
	t.Setenv("BROWSER", "curl -sfL -o /dev/null")
	if _, stderr, code := cli(t, "auth", "login", "-f", wf, "local", "--db", db); code != 0 {
		t.Fatalf("auth login: exit %d\n%s", code, stderr)
	}
	out, stderr, code := cli(t, "run", wf, "--db", db, "--output", "json")
	if code == 0 {
		t.Fatalf("run of a missing tool: exit 0, want a failure\n%s", stderr)
	}
	runID := jsonRunID(t, out)
	if _, _, code := cli(t, "auth", "logout", "-f", wf, "local", "--db", db); code != 0 {
		t.Fatalf("logout: exit %d", code)
	}
	before, logged := srv.requests(), len(describe(t, db, runID))
	_, stderr, code = cli(t, "resume", runID, "--retry-failed", "--db", db)
	want := "agentctl auth login -f " + wf + " local"
	if code != 6 || !strings.Contains(stderr, want) {
		t.Fatalf("resume: exit %d; want 6 naming %q\n%s", code, want, stderr)
	}
	if n := srv.requests() - before; n != 0 {
		t.Fatalf("the server got %d requests from a resume without its login", n)
	}
	if n := len(describe(t, db, runID)); n != logged {
		t.Fatalf("the resume appended %d events", n-logged)
	}
}
