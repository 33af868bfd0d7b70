package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_WorkerSessionReuseKilledThenResumed: a worker runs 4 queued
// runs of an idempotent call at once on one shared session (1 initialize:
// one run opened it, three borrowed it) and is killed (SIGKILL) while the
// 4 calls execute. A second worker resumes each run on a session of its
// own (generation 2, not borrowed: a resume opens a new session as
// before), sends the call again as its class allows, and succeeds. Every
// run's log verifies, its projection rebuilds equal, and it replays from
// its own log.
func TestCLI_WorkerSessionReuseKilledThenResumed(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		const runs = 4
		tool := newCountingTool()
		tool.blockAfter(0, runs)
		srv := mcptest.Start(t, mcptest.Options{}, tool.def())
		db := b.DSN(t)
		path := queueWorkflow(t, srv.URL, 1)
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(src), "idempotency: at_most_once", "idempotency: idempotent", 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		ids := submitN(t, db, path, runs)

		first := subprocess(t, "worker", "--drain", "--concurrency", fmt.Sprint(runs), "--db", db)
		if err := first.Start(); err != nil {
			t.Fatal(err)
		}
		for range runs {
			select {
			case <-tool.entered:
			case <-time.After(60 * time.Second):
				_ = first.Process.Kill()
				t.Fatal("the calls did not all reach the server (a failsafe, not a synchronisation)")
			}
		}
		if err := first.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = first.Wait()
		awaitDeadOwners(t, db)
		tool.unblock()
		if st := srv.Stats(); st.Initialize != 1 || st.List != 1 {
			t.Fatalf("first worker: %d initialize, %d tools/list; want 1 shared session", st.Initialize, st.List)
		}

		out, err := subprocess(t, "worker", "--drain", "--db", db).CombinedOutput()
		if err != nil {
			t.Fatalf("second worker: %v\n%s", err, out)
		}
		if st := srv.Stats(); st.Initialize != 1+runs {
			t.Fatalf("after the resumes: %d initialize, want %d (each resume opens its own)", st.Initialize, 1+runs)
		}
		states := runStates(t, db)
		borrowed := 0
		for _, id := range ids {
			if states[id] != "succeeded" {
				t.Errorf("run %s: %s", id, states[id])
			}
			var opened []vocab.SessionOpened
			for _, e := range logOf(t, db, id) {
				if e.Type == vocab.TypeSessionOpened {
					p, err := vocab.Decode[vocab.SessionOpened](e)
					if err != nil {
						t.Fatal(err)
					}
					opened = append(opened, p)
				}
			}
			if len(opened) != 2 || opened[0].Generation != 1 || opened[1].Generation != 2 || opened[1].BorrowedFrom != nil {
				t.Fatalf("run %s sessions %+v", id, opened)
			}
			if opened[0].BorrowedFrom != nil {
				borrowed++
			}
			if n, err := openLog(t, db).VerifyRun(context.Background(), id); err != nil || n != int64(len(logOf(t, db, id))) {
				t.Fatalf("run %s: chain %d, %v", id, n, err)
			}
			assertRebuildEqual(t, db, id)
			if code, _, _ := replayCLI(t, db, id); code != 0 {
				t.Fatalf("replay of %s: exit %d", id, code)
			}
		}
		if borrowed != runs-1 {
			t.Fatalf("%d runs borrowed the session, want %d", borrowed, runs-1)
		}
	})
}

// TestCLI_WorkerNoSessionReuse: with --no-session-reuse every run opens
// its own session (3 runs, 3 initialize, 3 tools/list); without it the
// worker's runs share one (3 more runs, 1 more initialize).
func TestCLI_WorkerNoSessionReuse(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	db := filepath.Join(t.TempDir(), "agentctl.db")
	wf := queueWorkflow(t, srv.URL, 1)
	submitN(t, db, wf, 3)
	if out, err := subprocess(t, "worker", "--drain", "--no-session-reuse", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	if st := srv.Stats(); st.Initialize != 3 || st.List != 3 || st.Calls["act"] != 3 {
		t.Fatalf("--no-session-reuse: %d initialize, %d tools/list, %d calls; want 3 of each", st.Initialize, st.List, st.Calls["act"])
	}
	submitN(t, db, wf, 3)
	if out, err := subprocess(t, "worker", "--drain", "--db", db).CombinedOutput(); err != nil {
		t.Fatalf("worker: %v\n%s", err, out)
	}
	if st := srv.Stats(); st.Initialize != 4 || st.List != 4 || st.Calls["act"] != 6 {
		t.Fatalf("reuse: %d initialize, %d tools/list, %d calls in all; want 4, 4, 6", st.Initialize, st.List, st.Calls["act"])
	}
}
