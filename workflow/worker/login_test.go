package worker_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/transport/oauth"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/worker"
)

// TestWorker_OrphanWithoutLoginNotResumed (issue 31 follow-up): an
// orphaned run whose server's login was removed after it started is not
// resumed by a worker: nothing is sent to the server, nothing appended to
// the run (it stays resumable once someone logs in), and the worker's
// result names the login command (exit 6).
func TestWorker_OrphanWithoutLoginNotResumed(t *testing.T) {
	ctx := context.Background()
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	db := testkit.Backends(t)[0].Open(t, events.Options{}) // SQLite: an orphan is a run no process holds
	wf := mustParse(t, testkit.Workflow{Name: "authorized", URL: srv.URL,
		ServerKeys: []string{"auth: {oauth: {clientId: agentctl-cli}}"},
		Tasks:      []testkit.Task{{ID: "only", Action: "act", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 1}"}}}.YAML())
	store := workflow.CredentialStore{DB: db, AllowPlaintext: true}
	if _, err := store.Update(ctx, oauth.Key{Issuer: "https://as.example", ClientID: "agentctl-cli", Resource: srv.URL}, func(*oauth.Credentials) (*oauth.Credentials, error) {
		return &oauth.Credentials{ClientID: "agentctl-cli", AccessToken: "at", TokenType: "Bearer"}, nil
	}); err != nil {
		t.Fatal(err)
	}
	id, err := (&workflow.Runner{DB: db}).Submit(ctx, wf, map[string]any{}, workflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	close(stop) // a worker stopping at once: run.started, then no task, the run left running
	res, err := (&workflow.Runner{DB: db, Stop: stop}).RunQueued(ctx, id, "first")
	if err != nil || res.State != "running" {
		t.Fatalf("stopped run: %+v, %v; want running", res, err)
	}
	if _, err := db.DeleteCredentials(ctx, events.CredentialKey{}); err != nil { // auth logout
		t.Fatal(err)
	}
	logged := len(describeRun(t, db, id))
	w := &worker.Worker{DB: db, Concurrency: 1, Drain: true, Name: "second",
		NewRunner: func() *workflow.Runner { return &workflow.Runner{AllowPlaintextCredentials: true} }}
	out, err := w.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := "agentctl auth login -f test.yaml local"
	if len(out) != 1 || !out[0].Resumed || out[0].Exit != workflow.ExitRemote || out[0].Error == nil || !strings.Contains(*out[0].Error, want) {
		t.Fatalf("worker results %+v; want the orphan's, exit 6, naming %q", out, want)
	}
	if st := srv.Stats(); st.Posts != 0 {
		t.Fatalf("the server got %d requests", st.Posts)
	}
	if n := len(describeRun(t, db, id)); n != logged {
		t.Fatalf("the worker appended %d events to the run", n-logged)
	}
}
