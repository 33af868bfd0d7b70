package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// replayHintsOK fails t if a replay's output suggests any command but
// inspecting the replay itself: a replay is never resumed or reconciled.
func replayHintsOK(t *testing.T, out string) {
	t.Helper()
	for _, h := range printedHints(out) {
		if !strings.HasPrefix(h, "agentctl inspect replay-") {
			t.Fatalf("the replay of a recovered run suggests %q:\n%s", h, out)
		}
	}
}

// TestCLI_ReplayReconciledRun: a run interrupted (SIGINT) with its
// at_most_once call on the server, reconciled (applied, or not applied)
// and resumed to succeeded, replays to succeeded (exit 0) with the
// resumed run's outputs, the operator's verdict recorded in the replay,
// no request to the server and no hint but inspect.
func TestCLI_ReplayReconciledRun(t *testing.T) {
	for _, verdict := range []string{"applied", "not-applied"} {
		t.Run(verdict, func(t *testing.T) {
			entered := make(chan struct{})
			var calls atomic.Int32
			srv := mcptest.Start(t, mcptest.Options{}, blockingAct(entered, &calls))
			dir := t.TempDir()
			db := filepath.Join(dir, "a.db")
			t.Setenv("AGENTCTL_DB", db)
			result := filepath.Join(dir, "result.json")
			if err := os.WriteFile(result, []byte(`{"done": true}`), 0o600); err != nil {
				t.Fatal(err)
			}
			stderr := interruptRun(t, actWorkflow(t, srv.URL, "at_most_once"), entered)
			runID := runIDs(t, db)[0]
			reconciled := false
			for _, h := range printedHints(stderr) {
				if strings.Contains(h, "effects reconcile") && strings.Contains(h, "--status "+verdict+" ") {
					if out, e, code := runHint(t, h, result); code != 0 {
						t.Fatalf("%s: exit %d\n%s\n%s", h, code, out, e)
					}
					reconciled = true
				}
			}
			if !reconciled {
				t.Fatalf("no reconcile hint for %s:\n%s", verdict, stderr)
			}
			// Reconciled, not yet resumed: the replay ends where the source
			// did, and names the verdict instead of a reconcile it refuses.
			_, e, code := cli(t, "replay", runID)
			if code == 0 || !strings.Contains(e, "reconciled in run "+runID+": "+verdict) {
				t.Fatalf("replay of a reconciled, unresumed run: exit %d\n%s", code, e)
			}
			replayHintsOK(t, e)
			code, src, rstderr := resumeJSON(t, db, runID)
			if code != 0 || src["state"] != "succeeded" {
				t.Fatalf("resume: exit %d %v\n%s", code, src, rstderr)
			}
			before := len(srv.Stats().Requests)
			for i := range 2 { // a replay of the replay too
				out, e, code := cli(t, "replay", runID, "--output", "json")
				if code != 0 {
					t.Fatalf("replay of the recovered run: exit %d, want 0 (the source's final outcome)\n%s\n%s", code, out, e)
				}
				replayHintsOK(t, out+e)
				rep := envelopeData(t, out)
				if rep["state"] != "succeeded" || !equalJSON(rep["outputs"], src["outputs"]) {
					t.Fatalf("replay %d = %v, source %v", i, rep, src)
				}
				if !strings.Contains(strings.Join(describe(t, db, rep["runId"].(string)), "\n"), "call.reconciled") {
					t.Fatalf("replay %d does not record the operator's verdict:\n%s", i, strings.Join(describe(t, db, rep["runId"].(string)), "\n"))
				}
				if i == 0 {
					runID = rep["runId"].(string)
				}
			}
			if n := len(srv.Stats().Requests); n != before {
				t.Fatalf("the server saw %d requests during the replays", n-before)
			}
			// Human output: exit 0, no hint but inspect.
			_, e, code = cli(t, "replay", runIDs(t, db)[0])
			if code != 0 {
				t.Fatalf("replay (human): exit %d\n%s", code, e)
			}
			replayHintsOK(t, e)
		})
	}
}

// taskGetSignal serves srv on 127.0.0.1 and calls stop once, at the first
// tasks/get it receives (before srv answers it): the moment a user would
// press Ctrl-C while agentctl polls. It returns the MCP URL.
func taskGetSignal(t *testing.T, srv *mcptest.Server, stop func()) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"tasks/get"`)) {
				once.Do(stop)
			}
		}
		srv.ServeHTTP(w, r)
	})
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	return "http://" + ln.Addr().String() + "/mcp"
}

// TestCLI_ReplayCancelledTaskRunResumed: a run whose task call was
// cancelled by the user while it polled (tasks/cancel confirmed: exit 130)
// and then resumed to succeeded (a new attempt) replays to succeeded,
// exit 0, with no request to the server and no hint but inspect.
func TestCLI_ReplayCancelledTaskRunResumed(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 1, PollInterval: 10}}, researchTool())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := taskGetSignal(t, srv, cancel)
	// The first tasks/get is held until the run lets it go (Ctrl-C).
	srv.Inject(mcptest.Fault{RPCMethod: "tasks/get", Nth: 1, Hang: make(chan struct{})})
	db := filepath.Join(t.TempDir(), "a.db")
	var out, errb bytes.Buffer
	if code := execute(ctx, []string{"run", researchWorkflow(t, url, "at_most_once"), "--db", db}, &out, &errb); code != 130 {
		t.Fatalf("interrupted task run: exit %d, want 130\n%s", code, errb.String())
	}
	runID := runIDs(t, db)[0]
	code, src, stderr := resumeJSON(t, db, runID)
	if code != 0 || src["state"] != "succeeded" {
		t.Fatalf("resume: exit %d %v\n%s", code, src, stderr)
	}
	if ts := srv.TaskStats(); ts.Created != 2 || ts.Cancels != 1 {
		t.Fatalf("server tasks: %+v, want 2 created (the resume's new attempt), 1 cancelled", ts)
	}
	before := len(srv.Stats().Requests)
	rcode, repID, rep := replayCLI(t, db, runID)
	if rcode != 0 || rep["state"] != "succeeded" || !equalJSON(rep["outputs"], src["outputs"]) {
		t.Fatalf("replay: exit %d %v, want succeeded with %v", rcode, rep, src["outputs"])
	}
	_, e, hcode := cli(t, "replay", runID, "--db", db)
	if hcode != 0 {
		t.Fatalf("replay (human): exit %d\n%s", hcode, e)
	}
	replayHintsOK(t, e)
	if n := len(srv.Stats().Requests); n != before {
		t.Fatalf("the server saw %d requests during the replays", n-before)
	}
	_ = repID
}
