package main

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

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
