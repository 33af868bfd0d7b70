package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestCLI_ConcurrentResumesOneWins: two processes resume one crashed run at
// once. The log decides: one goes on, the other is refused (exit 2) because
// the run moved on after it read it, and the call is sent at most twice.
func TestCLI_ConcurrentResumesOneWins(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	db := filepath.Join(t.TempDir(), "a.db")
	runID := crashRun(t, db, actWorkflow(t, srv.URL, "idempotent"), "mcp.request out tools/call")
	codes := make([]int, 2)
	outs := make([]string, 2)
	var wg sync.WaitGroup
	for i := range codes {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			cmd := subprocess(t, "resume", runID, "--db", db)
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			err := cmd.Run()
			outs[i] = buf.String()
			var ee *exec.ExitError
			switch {
			case err == nil:
			case errors.As(err, &ee):
				codes[i] = ee.ExitCode()
			default:
				t.Errorf("resume %d: %v", i, err)
			}
		}(i)
	}
	wg.Wait()
	if !(codes[0] == 0 && codes[1] == 2) && !(codes[0] == 2 && codes[1] == 0) {
		t.Fatalf("exit codes %v, want one 0 and one 2\n%s\n---\n%s", codes, outs[0], outs[1])
	}
	if st := srv.Stats(); st.Calls["act"] > 2 || st.Executed["act"] != 1 {
		t.Fatalf("server saw %d calls (%d executed); want at most 2 sends and 1 execution", st.Calls["act"], st.Executed["act"])
	}
	if _, err := openLog(t, db).VerifyRun(context.Background(), runID); err != nil {
		t.Fatalf("chain: %v", err)
	}
	assertRebuildEqual(t, db, runID)
}

// TestCLI_ResumeWhileRunning: a resume of a run whose process is still
// going (its call in flight) is refused, exit 2, before it reads or writes
// anything; the run then finishes normally.
func TestCLI_ResumeWhileRunning(t *testing.T) {
	called, release := make(chan struct{}), make(chan struct{})
	tool := actTool()
	act := tool.Handler
	tool.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		close(called)
		<-release
		return act(ctx, c)
	}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	db := filepath.Join(t.TempDir(), "a.db")
	run := subprocess(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db)
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	<-called // the run process is in its call, holding the run
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	before := logOf(t, db, ids[0])
	_, stderr, code := cli(t, "resume", ids[0], "--db", db)
	close(release)
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, out.String())
	}
	if code != 2 || !strings.Contains(stderr, "still going") {
		t.Fatalf("resume during the run: exit %d %s", code, stderr)
	}
	after := logOf(t, db, ids[0])
	for i, e := range before {
		if after[i].Hash != e.Hash {
			t.Fatalf("event %d changed", e.Seq)
		}
	}
	if last := after[len(after)-1]; last.Type != "run.finished" {
		t.Fatalf("last event %s", last.Type)
	}
	if n := srv.Stats().Calls["act"]; n != 1 {
		t.Fatalf("act called %d times", n)
	}
}

// TestCLI_ResumeOfLeasedRunPostgres: on PostgreSQL, a resume of a crashed
// run whose lease another process still holds (as right after a kill -9,
// before the server reaped the dead session) is refused with exit 2 and a
// message naming the owner and when its lease expires; nothing is sent or
// written. Once that lease is let go, the resume goes on.
func TestCLI_ResumeOfLeasedRunPostgres(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	db := testkit.PostgresDB(t)
	runID := crashRun(t, db, actWorkflow(t, srv.URL, "idempotent"), "mcp.request out tools/call")
	holder := testkit.OpenDB(t, db, events.Options{})
	unlock, err := holder.LockRun(runID)
	if err != nil {
		t.Fatalf("the other process's LockRun: %v", err)
	}
	leases, err := holder.RunLeases(context.Background(), []string{runID})
	if err != nil || leases[runID].Owner != holder.LeaseOwner() {
		t.Fatalf("leases = %v, %v; want %s's", leases, err, holder.LeaseOwner())
	}
	until := leases[runID].ExpiresAt.UTC().Format(time.RFC3339)
	before := logOf(t, db, runID)
	calls := srv.Stats().Calls["act"]
	_, stderr, code := cli(t, "resume", runID, "--db", db)
	if code != 2 || !strings.Contains(stderr, "leased by "+holder.LeaseOwner()+" until "+until) ||
		!strings.Contains(stderr, "retry after "+until) || !strings.Contains(stderr, "agentctl runs list") {
		t.Fatalf("resume of a leased run: exit %d, want 2 naming owner %s and expiry %s:\n%s", code, holder.LeaseOwner(), until, stderr)
	}
	if after := logOf(t, db, runID); len(after) != len(before) || srv.Stats().Calls["act"] != calls {
		t.Fatalf("the refused resume wrote %d events and sent %d calls", len(after)-len(before), srv.Stats().Calls["act"]-calls)
	}
	unlock()
	if _, stderr, code := cli(t, "resume", runID, "--db", db); code != 0 {
		t.Fatalf("resume after the lease was let go: exit %d\n%s", code, stderr)
	}
	if n := srv.Stats().Executed["act"]; n != 1 {
		t.Fatalf("act executed %d times, want 1", n)
	}
}

// TestCLI_ResumeWhileRunningOtherPath: a run in progress is its process's,
// whatever name another process gives the database. Through a symlink
// and a relative path via a symlinked directory, `resume` is refused
// (exit 2, "still going") and `worker --drain` takes nothing; through a
// hard link the database itself is refused (exit 5: SQLite would read the
// file without the WAL the run writes). The run then finishes, its
// idempotent call sent once and its log untouched by the others.
func TestCLI_ResumeWhileRunningOtherPath(t *testing.T) {
	called, release := make(chan struct{}), make(chan struct{})
	tool := actTool()
	act := tool.Handler
	tool.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		close(called)
		<-release
		return act(ctx, c)
	}
	srv := mcptest.Start(t, mcptest.Options{}, tool)
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	run := subprocess(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db)
	var out bytes.Buffer
	run.Stdout, run.Stderr = &out, &out
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
		_ = run.Wait()
	}()
	<-called // the run process is in its call, holding the run
	ids := runIDs(t, db)
	if len(ids) != 1 {
		t.Fatalf("runs: %v", ids)
	}
	before := logOf(t, db, ids[0])

	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(db, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(dir, "again")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	for _, p := range []string{link, filepath.Join("again", "a.db")} {
		if _, stderr, code := cli(t, "resume", ids[0], "--db", p); code != 2 || !strings.Contains(stderr, "still going") {
			t.Fatalf("resume --db %s during the run: exit %d, want 2 (still going)\n%s", p, code, stderr)
		}
		stdout, stderr, code := cli(t, "worker", "--drain", "--db", p, "--output", "json")
		var res struct {
			Data struct{ Runs []json.RawMessage }
		}
		if code != 0 || json.Unmarshal([]byte(stdout), &res) != nil || res.Data.Runs == nil || len(res.Data.Runs) != 0 {
			t.Fatalf("worker --drain --db %s during the run: exit %d, want 0 having taken nothing\n%s%s", p, code, stdout, stderr)
		}
	}
	hard := filepath.Join(dir, "hard.db")
	if err := os.Link(db, hard); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"resume", ids[0]}, {"worker", "--drain"}} {
		_, stderr, code := cli(t, append(args, "--db", hard)...)
		if code != 5 || !strings.Contains(stderr, "2 hard links") {
			t.Fatalf("%s --db %s (a hard link) during the run: exit %d, want 5 (hard links refused)\n%s", args[0], hard, code, stderr)
		}
	}
	if err := os.Remove(hard); err != nil {
		t.Fatal(err)
	}
	if got := srv.Stats().Calls["act"]; got != 1 {
		t.Fatalf("act called %d times while the run was in its call, want 1", got)
	}
	close(release)
	if err := run.Wait(); err != nil {
		t.Fatalf("the run: %v\n%s", err, out.String())
	}
	after := logOf(t, db, ids[0])
	for i, e := range before {
		if after[i].Hash != e.Hash {
			t.Fatalf("event %d changed", e.Seq)
		}
	}
	var types []string
	for _, e := range after[len(before):] {
		types = append(types, e.Type)
	}
	if last := after[len(after)-1]; last.Type != "run.finished" || slices.Contains(types, "run.resumed") {
		t.Fatalf("events after the others tried: %v; want the run's own, ending run.finished", types)
	}
	if st := srv.Stats(); st.Calls["act"] != 1 || st.Executed["act"] != 1 {
		t.Fatalf("act sent %d times, executed %d; want 1 and 1", st.Calls["act"], st.Executed["act"])
	}
}
