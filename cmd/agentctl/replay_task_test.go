package main

import (
	"crypto/rand"
	"encoding/base64"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// replayCLI replays runID through the CLI and returns its exit code and
// the replay's run id.
func replayCLI(t *testing.T, db, runID string) (int, string, map[string]any) {
	t.Helper()
	out, stderr, code := cli(t, "replay", runID, "--db", db, "--output", "json")
	data := map[string]any{}
	if code == 0 {
		data = envelopeData(t, out)
	}
	id, _ := data["runId"].(string)
	if code == 0 && !strings.HasPrefix(id, "replay-") {
		t.Fatalf("replay of %s: exit %d, run id %q\n%s", runID, code, id, stderr)
	}
	return code, id, data
}

// callEvents are the call.* events of a run, as described.
func callEvents(t *testing.T, db, runID string) []string {
	t.Helper()
	var out []string
	for _, l := range describe(t, db, runID) {
		if strings.HasPrefix(l, "call.") {
			out = append(out, l)
		}
	}
	return out
}

// TestCLI_ReplayTaskRun: `agentctl replay` of runs whose call was an MCP
// task, in an encrypted database (the task events are sealed), and of an
// `mcp call` of a task-required tool: exit 0 with the source's outputs,
// inspect shows the task with its poll count, the server sees no request,
// and two replays record the same call events.
func TestCLI_ReplayTaskRun(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 3, PollInterval: 10}}, researchTool())
	db := filepath.Join(t.TempDir(), "a.db")
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	t.Setenv("MY_KEY", base64.StdEncoding.EncodeToString(key))
	if _, stderr, code := cli(t, "db", "encryption", "enable", "--key-id", "k1", "--key-env", "MY_KEY", "--db", db); code != 0 {
		t.Fatalf("enable exit %d: %s", code, stderr)
	}
	t.Setenv("AGENTCTL_KEY_K1", base64.StdEncoding.EncodeToString(key))
	out, stderr, code := cli(t, "run", researchWorkflow(t, srv.URL, "at_most_once"), "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("run exit %d: %s", code, stderr)
	}
	src := envelopeData(t, out)
	runID := src["runId"].(string)
	out, stderr, code = cli(t, "mcp", "call", srv.URL, "research", "--args", `{"n":2}`, "--idempotency", "at_most_once", "--allow-private", "--db", db, "--output", "json")
	if code != 0 {
		t.Fatalf("mcp call exit %d: %s", code, stderr)
	}
	adhocID := jsonRunID(t, out)
	before := len(srv.Stats().Requests)

	code, repID, rep := replayCLI(t, db, runID)
	if code != 0 || rep["state"] != "succeeded" || src["outputs"] == nil || !equalJSON(rep["outputs"], src["outputs"]) {
		t.Fatalf("replay exit %d: %v, source %v", code, rep, src)
	}
	insp, stderr, code := cli(t, "inspect", repID, "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(insp, `"taskId": "mcptest-task-1"`) || !strings.Contains(insp, `"polls": 4`) {
		t.Fatalf("inspect of the replay: exit %d %s\n%s", code, stderr, insp)
	}
	_, repID2, _ := replayCLI(t, db, runID)
	if a, b := callEvents(t, db, repID), callEvents(t, db, repID2); !slices.Equal(a, b) || !slices.Equal(a, callEvents(t, db, runID)) {
		t.Fatalf("replays and source differ:\n%v\n%v\n%v", a, b, callEvents(t, db, runID))
	}
	if code, _, rep := replayCLI(t, db, adhocID); code != 0 || rep["state"] != "succeeded" {
		t.Fatalf("replay of mcp call: exit %d %v", code, rep)
	}
	if n := len(srv.Stats().Requests); n != before {
		t.Fatalf("the server saw %d requests during the replays", n-before)
	}
}

// TestCLI_ReplayResumedTaskRun: a run killed while it polled its task and
// then resumed (same task: on the reattached session with encryption on,
// on a new session of its own with encryption off) replays from its log:
// the outcome and outputs of the resumed run, the source's call events but
// the resume's, no request to the server, the same call events twice; the
// replay opens one session and reattaches none.
func TestCLI_ReplayResumedTaskRun(t *testing.T) {
	for _, mode := range []string{"sealed", "clear"} {
		for _, idem := range []string{"at_most_once", "idempotent"} {
			t.Run(mode+"/"+idem, func(t *testing.T) { replayResumedTaskRun(t, idem, mode == "sealed") })
		}
	}
}

func replayResumedTaskRun(t *testing.T, idem string, sealed bool) {
	srv := mcptest.Start(t, mcptest.Options{Tasks: &mcptest.TaskOptions{WorkingPolls: 4, PollInterval: 10, Shared: !sealed}}, researchTool())
	db := t.TempDir() + "/a.db"
	if sealed {
		sealDB(t, db)
	}
	runID := crashRun(t, db, researchWorkflow(t, srv.URL, idem), "call.transition accepted->polling")
	code, data, stderr := resumeJSON(t, db, runID)
	if code != 0 || data["state"] != "succeeded" {
		t.Fatalf("resume exit %d, data %v\n%s", code, data, stderr)
	}
	before := len(srv.Stats().Requests)
	code, repID, rep := replayCLI(t, db, runID)
	if code != 0 || rep["state"] != "succeeded" || data["outputs"] == nil || !equalJSON(rep["outputs"], data["outputs"]) {
		t.Fatalf("replay exit %d: %v, source %v", code, rep, data)
	}
	// The replay does not crash: its call events are the source's
	// without the resume's polling->polling (interrupted), and it
	// reattaches nothing.
	want := slices.DeleteFunc(callEvents(t, db, runID), func(l string) bool { return l == "call.transition polling->polling" })
	repLog := describe(t, db, repID)
	if got := callEvents(t, db, repID); !slices.Equal(got, want) || slices.Contains(repLog, "session.reattached") ||
		len(slices.DeleteFunc(slices.Clone(repLog), func(l string) bool { return l != "session.opened" })) != 1 {
		t.Fatalf("replay call events:\n%s\nwant:\n%s\nreplay log:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), strings.Join(repLog, "\n"))
	}
	_, repID2, _ := replayCLI(t, db, runID)
	if a, b := callEvents(t, db, repID), callEvents(t, db, repID2); !slices.Equal(a, b) {
		t.Fatalf("two replays differ:\n%v\n%v", a, b)
	}
	if n := len(srv.Stats().Requests); n != before {
		t.Fatalf("the server saw %d requests during the replays", n-before)
	}
}

// equalJSON compares decoded JSON values.
func equalJSON(a, b any) bool { return reflect.DeepEqual(a, b) }
