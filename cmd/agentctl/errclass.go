package main

import (
	"errors"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/migrations"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// errorClass names what kind of failure err is, for scripts (the `class`
// of the JSON error envelope and of a RunResult): a transport failure's
// kind (timeout, unauthorized, tool_error…) when the error carries one,
// else the kind of local problem, else the class of its exit code.
func errorClass(err error, code int) string {
	if err == nil {
		return ""
	}
	if k := transport.KindOf(err); k != "" {
		return string(k)
	}
	var amb *projector.AmbiguousError
	var ds spec.Diagnostics
	var de *workflow.DivergenceError
	switch {
	case errors.As(err, &amb):
		return "ambiguous_id"
	case errors.Is(err, projector.ErrUnknownRun):
		return "unknown_run"
	case errors.Is(err, projector.ErrUnknownEffect):
		return "unknown_call"
	case errors.As(err, &ds) && ds.PolicyOnly():
		return "policy_denied"
	case errors.As(err, &ds):
		return "invalid_workflow"
	case errors.As(err, &de):
		return "replay_divergence"
	case errors.Is(err, events.ErrRunBusy), errors.Is(err, events.ErrBusy):
		return "busy"
	case errors.Is(err, migrations.ErrNewerSchema):
		return "newer_schema"
	}
	switch code {
	case workflow.ExitInvalid:
		return "invalid_input"
	case workflow.ExitUncertain:
		return "uncertain"
	case workflow.ExitFailed:
		return "failed"
	case workflow.ExitStorage:
		return "storage"
	case workflow.ExitRemote:
		return "remote"
	case workflow.ExitCancelled:
		return "cancelled"
	}
	return "internal"
}
