package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/migrations"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/transport/mcptest"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// TestClassify_Table: every error the CLI returns gets its exit code and
// class from workflow's one table: a code a command or a run decided
// wins, a policy refusal is named policy_denied (not uncertain) though it
// shares exit 3, and a transport failure is named by its kind.
func TestClassify_Table(t *testing.T) {
	policy := spec.Diagnostics{{File: "wf.yaml", Line: 3, Message: "remote not allowed", Policy: true}}
	malformed := spec.Diagnostics{{File: "wf.yaml", Line: 3, Message: "unknown field"}, policy[0]}
	te := func(k transport.Kind) error { return &transport.Error{Op: "call", Kind: k, Err: errors.New("x")} }
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		err   error
		code  int
		class workflow.Class
		runID string
	}{
		{"usage", nil, usageErr("--output %q", "xml"), 2, "invalid_input", ""},
		{"policy refusal", nil, invalid(policy), 3, "policy_denied", ""},
		{"malformed file", nil, invalid(malformed), 2, "invalid_workflow", ""},
		{"bare policy diagnostics", nil, fmt.Errorf("load: %w", policy), 3, "policy_denied", ""},
		{"uncertain run", nil, &workflow.Error{RunID: "run-1", Code: 3, Err: errors.New("task a: uncertain")}, 3, "uncertain", "run-1"},
		{"exit error names the run of its workflow error", nil, &exitError{code: 3, err: &workflow.Error{RunID: "run-2", Code: 3, Err: errors.New("u")}}, 3, "uncertain", "run-2"},
		{"uncertain call", nil, &workflow.Error{RunID: "run-1", Code: 3, Err: &workflow.UncertainError{Err: te(transport.KindHTTPStatus)}}, 3, "uncertain", "run-1"},
		{"uncertain call stopped by Ctrl-C", nil, &workflow.Error{Code: 130, Err: &workflow.UncertainError{Err: te(transport.KindCancelled)}}, 130, "cancelled", ""},
		{"failed run", nil, &workflow.Error{RunID: "run-1", Code: 4, Err: te(transport.KindToolError)}, 4, "tool_error", "run-1"},
		{"remote", nil, &exitError{code: 6, err: te(transport.KindTransportLoss)}, 6, "transport_loss", ""},
		{"network policy in a run", nil, &workflow.Error{Code: 3, Err: te(transport.KindPolicyDenied)}, 3, "policy_denied", ""},
		{"cancelled run", nil, &workflow.Error{Code: 130, Err: errors.New("stopped")}, 130, "cancelled", ""},
		{"ambiguous id", nil, &projector.AmbiguousError{Kind: "run", Prefix: "run-0", Matches: []string{"a", "b"}}, 2, "ambiguous_id", ""},
		{"unknown run", nil, fmt.Errorf("inspect: %w", projector.ErrUnknownRun), 2, "unknown_run", ""},
		{"unknown call", nil, fmt.Errorf("reconcile: %w", projector.ErrUnknownEffect), 2, "unknown_call", ""},
		{"newer schema", nil, fmt.Errorf("open: %w", migrations.ErrNewerSchema), 5, "newer_schema", ""},
		{"storage", nil, &events.Error{Op: "append", Err: errors.New("disk full")}, 5, "storage", ""},
		{"locked", nil, &events.Error{Op: "append", Err: events.ErrBusy}, 5, "busy", ""},
		{"broken chain", nil, &events.ChainError{RunID: "run-1", Seq: 4, Reason: "hash"}, 5, "storage", ""},
		{"resume of a busy run", nil, &workflow.Error{RunID: "run-1", Code: 2, Err: fmt.Errorf("resume: %w", events.ErrRunBusy)}, 2, "busy", "run-1"},
		{"divergence in a replay", nil, &workflow.Error{Code: 4, Err: &workflow.DivergenceError{TaskID: "a", Field: "tool"}}, 4, "replay_divergence", ""},
		{"audit verify", nil, &exitError{code: 4, err: errors.New("audit verify x: hash")}, 4, "failed", ""},
		{"interrupted", cancelled, errors.New("context canceled"), 130, "cancelled", ""},
		{"a bug", nil, errors.New("nil map"), 1, "internal", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := tc.ctx
			if ctx == nil {
				ctx = context.Background()
			}
			code, class, runID := classify(ctx, tc.err)
			if code != tc.code || class != tc.class || runID != tc.runID {
				t.Fatalf("classify = %d %s %q, want %d %s %q", code, class, runID, tc.code, tc.class, tc.runID)
			}
			if got := errorClass(tc.err, code); got != string(class) && tc.ctx == nil {
				t.Fatalf("errorClass = %s, want classify's %s", got, class)
			}
		})
	}
}

// TestCLI_PolicyRefusalIsNotUncertain: exit 3 is a policy refusal or an
// uncertain call, told apart by their class. A run whose session the
// secret policy refuses at run time (the header's secret file is a
// directory) sent nothing: it ends failed, class policy_denied, task
// failed, the server saw no request and the next command is not `effects
// list`. A call lost after dispatch of an at_most_once tool ends the run
// uncertain, class uncertain. `help exit-codes` lists both under 3.
func TestCLI_PolicyRefusalIsNotUncertain(t *testing.T) {
	type result struct {
		State      string `json:"state"`
		ExitCode   int    `json:"exitCode"`
		ErrorClass string `json:"errorClass"`
		Tasks      []struct {
			State string `json:"state"`
		} `json:"tasks"`
	}
	run := func(t *testing.T, wf string) (result, string) {
		t.Helper()
		out, stderr, code := cli(t, "run", wf, "--db", filepath.Join(t.TempDir(), "a.db"), "--output", "json")
		var env struct{ Data result }
		if err := json.Unmarshal([]byte(out), &env); err != nil || code != 3 || env.Data.ExitCode != 3 {
			t.Fatalf("run: exit %d (%v) %s\n%s", code, err, stderr, out)
		}
		return env.Data, stderr
	}
	t.Run("policy", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		roots := t.TempDir()
		if err := os.Mkdir(filepath.Join(roots, "token"), 0o700); err != nil {
			t.Fatal(err)
		}
		wf := writeFile(t, testkit.Workflow{URL: srv.URL,
			ServerKeys: []string{fmt.Sprintf("headers: {Authorization: {file: %q}}", filepath.Join(roots, "token"))},
			PolicyKeys: []string{fmt.Sprintf("secretFileRoots: [%q]", roots)},
			Tasks:      []testkit.Task{{ID: "only", Idempotency: "at_most_once", Tool: "act"}}}.YAML())
		res, stderr := run(t, wf)
		if res.State != "failed" || res.ErrorClass != "policy_denied" || len(res.Tasks) != 1 || res.Tasks[0].State != "failed" {
			t.Fatalf("policy refusal: %+v, want failed, class policy_denied, task failed", res)
		}
		if !strings.Contains(stderr, `"class":"policy_denied"`) || strings.Contains(stderr, "effects list") {
			t.Fatalf("policy refusal: stderr %s", stderr)
		}
		if st := srv.Stats(); st.Posts+st.Gets+st.Deletes != 0 {
			t.Fatalf("the server saw requests: %+v", st)
		}
	})
	t.Run("uncertain", func(t *testing.T) {
		srv := mcptest.Start(t, mcptest.Options{}, actTool())
		srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusBadGateway, Nth: 1})
		wf := writeFile(t, testkit.Workflow{URL: srv.URL, Tasks: []testkit.Task{{ID: "only", Idempotency: "at_most_once", Tool: "act"}}}.YAML())
		res, stderr := run(t, wf)
		if res.State != "uncertain" || res.ErrorClass != "uncertain" || len(res.Tasks) != 1 || res.Tasks[0].State != "uncertain" {
			t.Fatalf("uncertain call: %+v, want uncertain, class uncertain", res)
		}
		if !strings.Contains(stderr, `"class":"uncertain"`) {
			t.Fatalf("uncertain call: stderr %s", stderr)
		}
	})
	out, _, code := cli(t, "help", "exit-codes")
	for _, want := range []string{"    3  uncertain ", "    3  policy_denied "} {
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("help exit-codes: exit %d, no %q:\n%s", code, want, out)
		}
	}
}
