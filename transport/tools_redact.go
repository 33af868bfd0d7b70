package transport

import (
	"encoding/json"
	"fmt"
)

// Redaction of what tools/list and initialize return (issue 27 item 1).
// A server may echo a credential it received in any string of its
// answers: the raw frames are redacted, and so is every remote string
// agentctl keeps from them (Session.ServerInfo, Capabilities and
// Instructions; every Tool member but the name). Decisions are taken on
// what the server sent: a tool's digest, its argument and output
// validation and its task support read the members as received, which a
// listed tool keeps beside their redacted copies. A tool whose name
// carries a secret is not listed (a warning says so, the name redacted):
// it cannot be called, and a call naming it fails as a missing tool.

// toolSent holds the members of a listed tool that redaction changed, as
// the server sent them (nil where nothing was scrubbed).
type toolSent struct {
	inputSchema, outputSchema, execution json.RawMessage
}

// redactTool returns t with its remote text redacted by red, keeping in
// t.sent what the schemas and execution were as received.
func redactTool(t Tool, red *redactor) Tool {
	var sent toolSent
	scrubbed := func(raw json.RawMessage, keep *json.RawMessage) json.RawMessage {
		out := red.json(raw)
		if string(out) != string(raw) {
			*keep = raw
		}
		return out
	}
	t.Title, t.Description = red.string(t.Title), red.string(t.Description)
	t.InputSchema = scrubbed(t.InputSchema, &sent.inputSchema)
	t.OutputSchema = scrubbed(t.OutputSchema, &sent.outputSchema)
	t.Execution = scrubbed(t.Execution, &sent.execution)
	t.Annotations = red.json(t.Annotations) // recorded, never decides anything
	if sent.inputSchema != nil || sent.outputSchema != nil || sent.execution != nil {
		t.sent = &sent
	}
	t.red = red
	return t
}

// secretNameWarning is the catalog warning of a tool whose name carries a
// secret value (the name redacted), or "" when it carries none.
func secretNameWarning(name string, red *redactor) string {
	if r := red.string(name); r != name {
		return fmt.Sprintf("tool %q: skipped: its name carries a secret value agentctl sent; it cannot be called", red.cut(name, 128))
	}
	return ""
}

// inputSchema, outputSchema and execution are the tool's members as the
// server sent them: what the digest, validation and task support read.
func (t Tool) inputSchema() json.RawMessage {
	if t.sent != nil && t.sent.inputSchema != nil {
		return t.sent.inputSchema
	}
	return t.InputSchema
}

func (t Tool) outputSchema() json.RawMessage {
	if t.sent != nil && t.sent.outputSchema != nil {
		return t.sent.outputSchema
	}
	return t.OutputSchema
}

func (t Tool) execution() json.RawMessage {
	if t.sent != nil && t.sent.execution != nil {
		return t.sent.execution
	}
	return t.Execution
}

// OutputSchemaRedacted reports whether the tool's outputSchema as listed
// carried a secret value: OutputSchema holds its redacted copy, and a
// verdict taken on the schema as received must be recorded (CheckReceived).
func (t Tool) OutputSchemaRedacted() bool { return t.sent != nil && t.sent.outputSchema != nil }

// WithDigest returns t with its digest fixed to digest ("" leaves it
// computed): a tool rebuilt from a recorded catalog keeps the digest that
// was computed, when it was listed, on its members as received, since the
// recorded schemas may be redacted copies that digest differently.
func (t Tool) WithDigest(digest string) Tool {
	t.digest = digest
	return t
}

// scrub redacts a validation error: its message may quote the schema as
// received, which may carry a secret value.
func (t Tool) scrub(err error) error {
	e, ok := err.(*Error)
	if !ok || t.red == nil {
		return t.red.error(err)
	}
	c := *e
	c.Message, c.Err = t.red.string(c.Message), t.red.error(c.Err)
	return &c
}
