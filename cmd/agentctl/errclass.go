package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/migrations"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// localClass names the kind of local problem err is, in the order the
// rules are tried ("" when none matches). The code and the name of each
// class are workflow's one table ([workflow.Classes]).
func localClass(err error) workflow.Class {
	var amb *projector.AmbiguousError
	var ds spec.Diagnostics
	var de *workflow.DivergenceError
	var se *events.Error
	var ce *events.ChainError
	switch {
	case errors.As(err, &amb):
		return workflow.ClassAmbiguousID
	case errors.Is(err, projector.ErrUnknownRun):
		return workflow.ClassUnknownRun
	case errors.Is(err, projector.ErrUnknownEffect):
		return workflow.ClassUnknownCall
	case errors.As(err, &ds) && ds.PolicyOnly():
		// the file or the flags are fine, the policy forbids them
		return workflow.ClassPolicyDenied
	case errors.As(err, &ds):
		return workflow.ClassInvalidWorkflow
	case errors.As(err, &de):
		return workflow.ClassReplayDivergence
	case errors.Is(err, events.ErrRunBusy), errors.Is(err, events.ErrBusy):
		return workflow.ClassBusy
	case errors.Is(err, migrations.ErrNewerSchema):
		return workflow.ClassNewerSchema
	case errors.As(err, &se), errors.As(err, &ce):
		// A stored chain that does not recompute is a storage fault, as
		// when resume, replay or inspect --verify find it (an audit file
		// that does not verify is `audit verify`'s exit 4, decided there).
		return workflow.ClassStorage
	}
	return ""
}

// explicitCode is the exit code a command or a run decided for err, and
// the run it concerns: an *exitError's, else a *workflow.Error's.
func explicitCode(err error) (code int, runID string, class workflow.Class, ok bool) {
	var we *workflow.Error
	hasWE := errors.As(err, &we)
	var ee *exitError
	if errors.As(err, &ee) {
		code, runID, class = ee.code, ee.runID, ee.class
		if runID == "" && hasWE {
			runID = we.RunID
		}
		return code, runID, class, true
	}
	if hasWE {
		return we.Code, we.RunID, "", true
	}
	return 0, "", "", false
}

// classify maps an error to its exit code, its class and the run it
// concerns (README.md, "Commands"). The code is the one a command or a
// run decided, else the code of the error's class, else 130 when the
// command was cancelled, else the transport kind's code, else 1. The
// class is className's.
func classify(ctx context.Context, err error) (int, workflow.Class, string) {
	if err == nil {
		return workflow.ExitOK, "", ""
	}
	code, runID, class, decided := explicitCode(err)
	local := localClass(err)
	kind := workflow.Class(transport.KindOf(err))
	if !decided {
		switch {
		case local != "":
			code = local.Code()
		case ctx.Err() != nil:
			code = workflow.ExitCancelled
		case kind != "":
			code = kind.Code()
		default:
			code = workflow.ExitInternal
		}
	}
	return code, className(err, code, class), runID
}

// className is the class of err, which ends with exit code code: the
// class the command named, else uncertain for a call left uncertain that
// ends the command with exit 3 (whatever failure left it so: exit 3 is
// uncertain or policy_denied, nothing else), else the transport failure's
// kind, else the kind of local problem, else the class the code stands for.
func className(err error, code int, named workflow.Class) workflow.Class {
	var ue *workflow.UncertainError
	if named == "" && code == workflow.ExitUncertain && errors.As(err, &ue) {
		return workflow.ClassUncertain
	}
	for _, c := range []workflow.Class{named, workflow.Class(transport.KindOf(err)), localClass(err)} {
		if c != "" {
			return c
		}
	}
	return workflow.ClassOfCode(code)
}

// errorClass names what kind of failure err, which ended with exit code
// code, is, for a RunResult's errorClass ("" when err is nil).
func errorClass(err error, code int) string {
	if err == nil {
		return ""
	}
	_, _, named, _ := explicitCode(err)
	return string(className(err, code, named))
}

// exitCodesTopic is `agentctl help exit-codes`: the error table, one class
// a line with its exit code and hint.
func exitCodesTopic() *cobra.Command {
	var b strings.Builder
	b.WriteString("Every command exits 0 when it succeeds. A failure exits with the code of its class;\n" +
		"--output json names the class in the error envelope (error.class) and a run's errorClass.\n" +
		"Two classes may share a code: 3 is a policy refusal or an uncertain call.\n\n")
	for _, r := range workflow.Classes() {
		fmt.Fprintf(&b, "  %3d  %-20s %s\n", r.Code, r.Class, r.Hint)
	}
	return &cobra.Command{Use: "exit-codes", Short: "Exit codes and the error classes of --output json", Long: strings.TrimRight(b.String(), "\n")}
}
