package main

import (
	"encoding/json"

	"github.com/agentctl/agentctl/fsm"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// The JSON views below give the library types that carry no json tags
// (they are not the CLI's contract) the one naming rule of every JSON
// output: camelCase keys (README.md, "Commands").

// toolView is a tool as `mcp tools --output json` prints it.
type toolView struct {
	Name         string          `json:"name"`
	Title        string          `json:"title"`
	Description  string          `json:"description"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema"`
	Annotations  json.RawMessage `json:"annotations"`
	Execution    json.RawMessage `json:"execution"`
}

func viewTools(ts []transport.Tool) []toolView {
	out := make([]toolView, len(ts))
	for i, t := range ts {
		out[i] = toolView{Name: t.Name, Title: t.Title, Description: t.Description,
			InputSchema: rawOrNull(t.InputSchema), OutputSchema: rawOrNull(t.OutputSchema), Annotations: rawOrNull(t.Annotations), Execution: rawOrNull(t.Execution)}
	}
	return out
}

func rawOrNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}

// diagnosticView is one problem `check` reports.
type diagnosticView struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Col     int    `json:"col"`
	Field   string `json:"field"`
	Message string `json:"message"`
	Policy  bool   `json:"policy"`
}

func viewDiagnostics(ds spec.Diagnostics) []diagnosticView {
	out := make([]diagnosticView, len(ds))
	for i, d := range ds {
		out[i] = diagnosticView{File: d.File, Line: d.Line, Col: d.Col, Field: d.Field, Message: d.Message, Policy: d.Policy}
	}
	return out
}

// transitionView is one call state-machine transition.
type transitionView struct {
	From    string `json:"from"`
	To      string `json:"to"`
	Trigger string `json:"trigger"`
	Reason  string `json:"reason"`
}

func viewTransition(t fsm.Transition) transitionView {
	return transitionView{From: string(t.From), To: string(t.To), Trigger: string(t.Trigger), Reason: t.Reason}
}
