// Package spec is the agentctl workflow language: the YAML file a user
// writes, read into Go values and checked, with nothing of the run in it.
// It imports neither the event log, the state machine nor the projector, so
// it can be learned and tested alone.
//
// Where a reader starts:
//
//   - spec.go: the types of a workflow file ([Workflow], [Spec], [TaskSpec],
//     [ActionSpec], [ServerSpec], ...), one field per YAML key.
//   - parse.go: [Load] and [Parse] turn bytes into a [Workflow]; every
//     problem comes back as [Diagnostics] with file, line and column.
//     parse_decode.go decodes the YAML node tree strictly (unknown keys,
//     wrong types, depth and size bounds), remembering positions.
//   - check.go and check_*.go: what the types cannot say: header, inputs,
//     actions, tasks and their needs (check_needs.go also orders tasks:
//     [Workflow.Order]), the network and secret policy (check_policy.go,
//     which applies the transport's own URL rule), template references;
//     check_warn.go: [Workflow.Warnings], what a valid file may not do as
//     its author expects (retry on an at_most_once or unknown action).
//   - template.go: ${{ inputs.x }} and ${{ tasks.t.output... }} templates;
//     [Render] fills them from a [Scope].
//   - inputs.go: [ResolveInputs] checks and coerces the values given to
//     a run (-i flags, [ParseInputFlag]; input files, [LoadInputsFile]).
//   - schema.go: [JSONSchema], the JSON Schema of the format for editors,
//     generated from the types; Parse remains the authority.
//   - transport.go: [Workflow.TransportConfig], a server declaration and the
//     policy as package transport takes them.
//
// The run loop that executes a parsed Workflow is package workflow.
package spec
