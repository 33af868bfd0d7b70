package main

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/migrations"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
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
