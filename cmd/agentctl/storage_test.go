package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
)

// runChains returns, per run, the hashes of its events in seq order, and
// checks that every run's chain verifies.
func runChains(t *testing.T, path string) map[string][]string {
	t.Helper()
	db, err := events.Open(context.Background(), path, events.Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	var rows []struct {
		RunID string `db:"run_id"`
		Hash  string `db:"hash"`
	}
	if err := db.SQL().Select(&rows, `SELECT run_id, hash FROM events ORDER BY run_id, seq`); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		out[r.RunID] = append(out[r.RunID], r.Hash)
	}
	for id := range out {
		if _, err := db.VerifyRun(context.Background(), id); err != nil {
			t.Errorf("run %s does not verify: %v", id, err)
		}
	}
	return out
}

func pageCount(t *testing.T, path string) int {
	t.Helper()
	db, err := events.Open(context.Background(), path, events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.SQL().Get(&n, `PRAGMA page_count`); err != nil {
		t.Fatal(err)
	}
	return n
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCLI_DiskFullIsExit5 simulates a full disk at every size a run can
// reach (AGENTCTL_TEST_MAX_PAGES = PRAGMA max_page_count): the seeded
// database is capped at its current size plus k pages, for k = 0, 1, …
// until a run fits. Every capped run exits 5 naming the full database,
// the runs already there are untouched, every chain (the partial run's
// included) verifies, inspect and audit export still work on the partial
// run, and the next uncapped run succeeds on the same file.
func TestCLI_DiskFullIsExit5(t *testing.T) {
	seed, _ := seededDB(t)
	_, url := demotest.StartTest(t, demoserver.Options{})
	wf := writeWorkflow(t, url)
	before := runChains(t, seed)
	pages := pageCount(t, seed)
	partial, fullAt := 0, -1
	sawDBLine := false // a human run said "the database failed" once
	for k := 0; k < 400 && fullAt < 0; k++ {
		path := filepath.Join(t.TempDir(), "capped.db")
		copyFile(t, seed, path)
		t.Setenv("AGENTCTL_TEST_MAX_PAGES", fmt.Sprint(pages+k))
		_, stderr, code := cli(t, "run", wf, "--db", path, "--output", "json")
		t.Setenv("AGENTCTL_TEST_MAX_PAGES", "")
		if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
			t.Fatalf("k=%d: panic output: %s", k, stderr)
		}
		switch code {
		case 0:
			fullAt = k
			continue
		case 5:
		default:
			t.Fatalf("k=%d: exit %d, want 5; stderr %s", k, code, stderr)
		}
		var env struct {
			Kind  string `json:"kind"`
			Error struct {
				Message  string `json:"message"`
				ExitCode int    `json:"exitCode"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(stderr), &env); err != nil || env.Kind != "Error" || env.Error.ExitCode != 5 {
			t.Fatalf("k=%d: stderr is not one error envelope with exit 5: %v\n%s", k, err, stderr)
		}
		if !strings.Contains(env.Error.Message, "full") {
			t.Errorf("k=%d: message does not say the database is full: %s", k, env.Error.Message)
		}
		if !sawDBLine {
			// Human output names what failed: the database, not the run.
			hpath := filepath.Join(t.TempDir(), "capped-human.db")
			copyFile(t, seed, hpath)
			t.Setenv("AGENTCTL_TEST_MAX_PAGES", fmt.Sprint(pages+k))
			_, hstderr, hcode := cli(t, "run", wf, "--db", hpath)
			t.Setenv("AGENTCTL_TEST_MAX_PAGES", "")
			if hcode != 5 || regexp.MustCompile(`run run-\S+ failed\n`).MatchString(hstderr) {
				t.Errorf("k=%d: human run exit %d, or it says the run failed where the database did: %s", k, hcode, hstderr)
			}
			sawDBLine = strings.Contains(hstderr, "stopped: the database failed")
		}
		after := runChains(t, path)
		for id, hashes := range before {
			if strings.Join(after[id], ",") != strings.Join(hashes, ",") {
				t.Fatalf("k=%d: run %s changed", k, id)
			}
		}
		for id := range after {
			if before[id] != nil {
				continue
			}
			partial++
			if _, stderr, code := cli(t, "inspect", id, "--db", path, "--output", "json"); code != 0 {
				t.Errorf("k=%d: inspect partial run: exit %d %s", k, code, stderr)
			}
			file := filepath.Join(t.TempDir(), "audit.jsonl")
			if _, stderr, code := cli(t, "audit", "export", id, "-o", file, "--db", path); code != 0 {
				t.Errorf("k=%d: audit export partial run: exit %d %s", k, code, stderr)
			} else if _, stderr, code := cli(t, "audit", "verify", file); code != 0 {
				t.Errorf("k=%d: audit verify partial run: exit %d %s", k, code, stderr)
			}
		}
		if k%25 == 0 || partial == 1 {
			if _, stderr, code := cli(t, "run", wf, "--db", path); code != 0 {
				t.Fatalf("k=%d: uncapped run after a full disk: exit %d %s", k, code, stderr)
			}
			runChains(t, path)
		}
	}
	if fullAt < 0 {
		t.Fatalf("no run fitted within %d extra pages", 400)
	}
	if partial == 0 {
		t.Fatalf("no cap left a partial run (run fits at +%d pages)", fullAt)
	}
	if !sawDBLine {
		t.Fatal("no human run said the database failed")
	}
	t.Logf("run fits at +%d pages; %d caps left a partial run", fullAt, partial)
}

// TestEvents_FailedAppendKeepsChain: at the events layer, an append that
// hits the cap returns a storage error, leaves the run's earlier events as
// they were, and the next append after the cap is lifted continues the
// chain at the next seq.
func TestEvents_FailedAppendKeepsChain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "a.db")
	ctx := context.Background()
	db, err := events.Open(ctx, path, events.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Append(ctx, "run-a", []events.Record{{Stream: "run", Type: "run.created"}}, nil); err != nil {
		t.Fatal(err)
	}
	db.Close()
	pages := pageCount(t, path)
	capped, err := events.Open(ctx, path, events.Options{MaxPageCount: pages})
	if err != nil {
		t.Fatal(err)
	}
	big := map[string]string{"blob": strings.Repeat("x", 64<<10)}
	_, err = capped.Append(ctx, "run-a", []events.Record{{Stream: "run", Type: "big", Payload: big}}, nil)
	var se *events.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "full") {
		t.Fatalf("append past the cap: %v, want a storage error saying full", err)
	}
	// The same handle, a small event: fits in the pages there are, chain intact.
	if _, err := capped.Append(ctx, "run-a", []events.Record{{Stream: "run", Type: "small"}}, nil); err != nil {
		t.Fatalf("small append after a failed one: %v", err)
	}
	capped.Close()
	chains := runChains(t, path)
	if len(chains["run-a"]) != 2 {
		t.Fatalf("run-a has %d events, want 2 (created, small)", len(chains["run-a"]))
	}
}
