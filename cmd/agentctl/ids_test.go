package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
)

// shortestUnique is the shortest prefix of the uuid part of id that no
// other id shares.
func shortestUnique(t *testing.T, id string, others ...string) string {
	t.Helper()
	u := strings.TrimPrefix(id, "run-")
	for n := 1; n <= len(u); n++ {
		p, clash := u[:n], false
		for _, o := range others {
			if strings.HasPrefix(strings.TrimPrefix(o, "run-"), p) {
				clash = true
			}
		}
		if !clash {
			return p
		}
	}
	t.Fatalf("%s has no unique prefix", id)
	return ""
}

// TestCLI_RunIDFirstAndPrefixes: run names its id (short form, then in
// full) on stderr before anything else; every command that takes a run id takes a unique prefix
// (with or without "run-") and "last"; an ambiguous prefix lists the
// matches and an unknown one names itself, both exit 2.
func TestCLI_RunIDFirstAndPrefixes(t *testing.T) {
	_, url := demotest.StartTest(t, demoserver.Options{})
	db := filepath.Join(t.TempDir(), "a.db")
	wf := writeWorkflow(t, url)
	var ids []string
	for range 2 {
		out, stderr, code := cli(t, "run", wf, "--input", "query=ids", "--db", db)
		if code != 0 {
			t.Fatalf("run exit %d: %s", code, stderr)
		}
		first, _, _ := strings.Cut(stderr, "\n")
		m := regexp.MustCompile(`^run [0-9a-f]{8,} started \((run-[0-9a-f-]{36})\)$`).FindStringSubmatch(first)
		if m == nil {
			t.Fatalf("stderr does not start with the run id:\n%s", stderr)
		}
		if strings.Contains(out, m[1]) {
			t.Fatalf("the run id went to stdout:\n%s", out)
		}
		ids = append(ids, m[1])
	}
	// json: stdout holds exactly the one envelope.
	out, _, code := cli(t, "run", wf, "--input", "query=ids", "--db", db, "--output", "json")
	var env struct {
		Kind string `json:"kind"`
		Data struct {
			RunID string `json:"runId"`
		} `json:"data"`
	}
	dec := json.NewDecoder(strings.NewReader(out))
	if code != 0 || dec.Decode(&env) != nil || env.Kind != "RunResult" || dec.More() {
		t.Fatalf("json run: exit %d, stdout is not one RunResult:\n%s", code, out)
	}
	ids = append(ids, env.Data.RunID)
	last := ids[2]
	short := shortestUnique(t, ids[0], ids[1:]...)

	runID := func(args ...string) string {
		t.Helper()
		out, stderr, code := cli(t, append(args, "--db", db, "--output", "json")...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		var env struct {
			Data struct {
				RunID string `json:"runId"`
				Run   struct {
					RunID string `json:"runId"`
				} `json:"run"`
			} `json:"data"`
		}
		if err := json.Unmarshal([]byte(out), &env); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		if env.Data.Run.RunID != "" {
			return env.Data.Run.RunID
		}
		return env.Data.RunID
	}
	for _, ref := range []string{ids[0], short, "run-" + short} {
		if got := runID("inspect", ref); got != ids[0] {
			t.Errorf("inspect %s = %s, want %s", ref, got, ids[0])
		}
		if got := runID("effects", "list", ref); got != ids[0] {
			t.Errorf("effects list %s = %s, want %s", ref, got, ids[0])
		}
	}
	if got := runID("inspect", "last"); got != last {
		t.Errorf("inspect last = %s, want %s", got, last)
	}
	if out, stderr, code := cli(t, "audit", "export", short, "--db", db); code != 0 || !strings.Contains(out, `"runId":"`+ids[0]+`"`) {
		t.Errorf("audit export %s: exit %d %s\n%.200s", short, code, stderr, out)
	}
	if _, stderr, code := cli(t, "db", "rebuild-projections", short, "--db", db); code != 0 {
		t.Errorf("db rebuild-projections %s: exit %d %s", short, code, stderr)
	}
	rp := runID("replay", short)
	if !strings.HasPrefix(rp, "replay-") {
		t.Errorf("replay %s = %s", short, rp)
	}
	if got := runID("inspect", "last"); got != last {
		t.Errorf("inspect last after replay = %s, want the last workflow run %s", got, last)
	}
	if got := runID("inspect", "last-replay"); got != rp {
		t.Errorf("inspect last-replay = %s, want the replay %s", got, rp)
	}
	// A replay's id takes a prefix of its uuid too.
	if got := runID("inspect", strings.TrimPrefix(rp, "replay-")); got != rp {
		t.Errorf("inspect of the replay by its uuid = %s", got)
	}

	// Ambiguous: "run-" is every recorded run; each command refuses it the same way.
	for _, args := range [][]string{{"inspect", "run-"}, {"resume", "run-"}, {"replay", "run-"}, {"effects", "list", "run-"}, {"audit", "export", "run-"}, {"db", "rebuild-projections", "run-"}} {
		out, stderr, code := cli(t, append(args, "--db", db)...)
		if code != 2 || out != "" || !strings.Contains(stderr, `run id prefix "run-" is ambiguous`) {
			t.Errorf("%v: exit %d, want 2 listing the matches:\n%s%s", args, code, out, stderr)
		}
		for _, id := range ids {
			if !strings.Contains(stderr, id) {
				t.Errorf("%v: the matches lack %s:\n%s", args, id, stderr)
			}
		}
	}
	for _, args := range [][]string{{"inspect", "zz9"}, {"resume", "zz9"}, {"replay", "zz9"}, {"effects", "list", "zz9"}, {"audit", "export", "zz9"}, {"effects", "reconcile", "zz9", "--status", "not-applied", "--reason", "x"}} {
		_, stderr, code := cli(t, append(args, "--db", db, "--output", "json")...)
		var e struct {
			Error struct {
				Message  string `json:"message"`
				ExitCode int    `json:"exitCode"`
			} `json:"error"`
		}
		if code != 2 || json.Unmarshal([]byte(stderr), &e) != nil || e.Error.ExitCode != 2 || !strings.Contains(e.Error.Message, `"zz9"`) {
			t.Errorf("%v: exit %d, want 2 naming the prefix: %s", args, code, stderr)
		}
	}
}

// TestCLI_EffectIDPrefix: reconcile and the hints after it take a unique
// prefix of a call id.
func TestCLI_EffectIDPrefix(t *testing.T) {
	srv, db, runID, id := uncertainRun(t)
	out, stderr, code := cli(t, "effects", "reconcile", strings.ToUpper(id[:10]), "--status", "not-applied", "--reason", "checked the shop", "--db", db)
	if code != 0 || !strings.Contains(out, "call "+id+" ") {
		t.Fatalf("reconcile by prefix: exit %d, want the full id named: %s%s", code, out, stderr)
	}
	effects := listEffects(t, db, runID[:12])
	if len(effects) != 1 || effects[0]["effectId"] != id || effects[0]["reconciled"] != "not-applied" {
		t.Fatalf("effects after reconcile by prefix: %v", effects)
	}
	if _, stderr, code := cli(t, "resume", "last", "--db", db); code != 0 {
		t.Fatalf("resume last: exit %d %s", code, stderr)
	}
	if n := srv.Stats().Calls["act"]; n != 2 {
		t.Fatalf("server saw %d calls, want 2 (the uncertain one and the new attempt)", n)
	}
}
