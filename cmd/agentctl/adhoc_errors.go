package main

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/agentctl/agentctl/workflow/spec"
)

// adhocError is a problem with the workflow an ad hoc command built from
// its flags, told in the flags' terms: the user wrote no file, so no file,
// line or workflow key is named, but the argument or flag at fault and the
// flag that fixes it. It unwraps to the diagnostics (exit codes and error
// classes are theirs).
type adhocError struct {
	ds    spec.Diagnostics
	lines []string
}

func (e *adhocError) Error() string { return strings.Join(e.lines, "\n") }
func (e *adhocError) Unwrap() error { return e.ds }

// adhocErr rewrites the diagnostics of an ad hoc command's workflow (any
// other error is returned as is).
func adhocErr(err error, to target) error {
	var ds spec.Diagnostics
	if !errors.As(err, &ds) {
		return err
	}
	e := &adhocError{ds: ds}
	for _, d := range ds {
		e.lines = append(e.lines, adhocField(d.Field, to)+": "+adhocMessage(d.Message))
	}
	return e
}

// adhocField names the argument or flag a workflow key came from.
func adhocField(field string, to target) string {
	const server = "spec.mcpServers.remote."
	switch {
	case field == server+"url":
		return "URL " + to.url
	case strings.HasPrefix(field, server+"headers."):
		return "--header " + strings.TrimPrefix(field, server+"headers.")
	case strings.HasPrefix(field, server+"command"), strings.HasPrefix(field, server+"env"):
		return "the server command after --"
	case field == server+"timeoutSeconds":
		return "--timeout"
	case strings.Contains(field, ".with.arguments"):
		return "--args"
	case strings.Contains(field, ".with.tool"):
		return "TOOL"
	case strings.HasPrefix(field, "spec.actions.call.idempotency"):
		return "--idempotency"
	case strings.HasPrefix(field, "spec.actions.call.elicitation"):
		return "--elicitation"
	}
	return "ad hoc call (" + field + ")"
}

// adhocMessage replaces a workflow key that fixes the problem by the flag
// that sets it.
func adhocMessage(msg string) string {
	return strings.NewReplacer(
		"set spec.policy.network.allowPrivate: true to allow it", "pass --allow-private to allow it (loopback and private addresses)",
	).Replace(msg)
}

// taskSupport is a tool's execution.taskSupport (forbidden, optional,
// required), "-" when it declares none.
func taskSupport(raw json.RawMessage) string {
	var e struct {
		TaskSupport string `json:"taskSupport"`
	}
	if json.Unmarshal(raw, &e) != nil || e.TaskSupport == "" {
		return "-"
	}
	return clean(e.TaskSupport)
}
