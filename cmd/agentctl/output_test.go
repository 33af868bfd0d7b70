package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// chattyServer serves act (see chattyTool) with msg as its description,
// title and first progress message.
func chattyServer(t *testing.T, msg string) *mcptest.Server {
	t.Helper()
	d := chattyTool()
	d.Description, d.Title = msg, msg
	d.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		if err := c.Progress(1, 2, msg); err != nil {
			return nil, err
		}
		return chattyTool().Handler(ctx, c)
	}
	return mcptest.Start(t, mcptest.Options{}, d)
}

// TestCLI_JSONLIsTheLog: --output jsonl prints exactly the run's events, in
// seq order, as persisted, then one RunResult envelope.
func TestCLI_JSONLIsTheLog(t *testing.T) {
	t.Parallel()
	srv := chattyServer(t, "half")
	srv.Inject(expired) // a reconnect: two sessions, a redispatch
	db := filepath.Join(t.TempDir(), "a.db")
	out, stderr, code := cli(t, "run", actWorkflow(t, srv.URL, "keyed"), "--db", db, "--output", "jsonl")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if stderr != "" {
		t.Fatalf("stderr in jsonl mode: %s", stderr)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	type env struct {
		APIVersion string          `json:"apiVersion"`
		Kind       string          `json:"kind"`
		OK         bool            `json:"ok"`
		Data       json.RawMessage `json:"data"`
	}
	var got []env
	for _, l := range lines {
		var e env
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line is not one JSON envelope: %v\n%s", err, l)
		}
		if e.APIVersion != APIVersion {
			t.Fatalf("apiVersion %q", e.APIVersion)
		}
		got = append(got, e)
	}
	last := got[len(got)-1]
	var res runResult
	if last.Kind != "RunResult" || !last.OK || json.Unmarshal(last.Data, &res) != nil || res.State != "succeeded" {
		t.Fatalf("last line is not a succeeded RunResult: %s", lines[len(lines)-1])
	}
	log := logOf(t, db, res.RunID)
	if len(got)-1 != len(log) {
		t.Fatalf("%d Event lines, %d events in the log", len(got)-1, len(log))
	}
	for i, e := range got[:len(got)-1] {
		var ev struct {
			RunID string `json:"runId"`
			Seq   int64  `json:"seq"`
			Type  string `json:"type"`
			Hash  string `json:"hash"`
		}
		if e.Kind != "Event" || json.Unmarshal(e.Data, &ev) != nil {
			t.Fatalf("line %d: %s", i, lines[i])
		}
		if ev.RunID != res.RunID || ev.Seq != log[i].Seq || ev.Type != log[i].Type || ev.Hash != log[i].Hash {
			t.Fatalf("line %d is %s #%d %s, log has #%d %s %s", i, ev.RunID, ev.Seq, ev.Type, log[i].Seq, log[i].Type, log[i].Hash)
		}
	}
}

// TestCLI_RemoteEscapesNeverPrinted: a tool title, description and progress
// message carrying terminal escapes never reach stdout or stderr as escapes,
// in any human output that shows them.
func TestCLI_RemoteEscapesNeverPrinted(t *testing.T) {
	t.Parallel()
	evil := "\x1b[31mRED\x1b[2J\x1b]0;pwned\x07\u009b31m"
	srv := chattyServer(t, evil)
	db := filepath.Join(t.TempDir(), "a.db")
	runOut, runErr, code := cli(t, "run", actWorkflow(t, srv.URL, "idempotent"), "--db", db, "--color", "never")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, runErr)
	}
	if !strings.Contains(runErr, "progress 1/2 �[31mRED") {
		t.Fatalf("the progress message is not shown cleaned:\n%s", runErr)
	}
	toolsOut, toolsErr, code := cli(t, "mcp", "tools", srv.URL, "--allow-private", "--db", db)
	if code != 0 || !strings.Contains(toolsOut, "�[31mRED") {
		t.Fatalf("mcp tools exit %d, description not shown cleaned:\n%s%s", code, toolsOut, toolsErr)
	}
	id := runIDs(t, db)[0]
	insOut, insErr, code := cli(t, "inspect", id, "--db", db)
	if code != 0 {
		t.Fatalf("inspect exit %d: %s", code, insErr)
	}
	for name, s := range map[string]string{"run stdout": runOut, "run stderr": runErr, "mcp tools": toolsOut + toolsErr, "inspect": insOut + insErr} {
		if strings.ContainsAny(s, "\x1b\u009b\x07") {
			t.Errorf("%s carries a raw escape: %q", name, s)
		}
	}
}

func TestCLI_ColorFlag(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"auto", "always", "never"} {
		if _, stderr, code := cli(t, "version", "--color", v); code != 0 {
			t.Errorf("--color %s: exit %d: %s", v, code, stderr)
		}
	}
	_, stderr, code := cli(t, "version", "--color", "sometimes")
	if code != 2 || !strings.Contains(stderr, `--color "sometimes"`) {
		t.Fatalf("--color sometimes: exit %d: %s", code, stderr)
	}
}
