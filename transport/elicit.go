package transport

import (
	"context"
	"encoding/json"
	"math"
	"slices"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// How a call answers a server's elicitation/create request (2025-11-25
// form mode). agentctl has no person to ask: the workflow author decides
// ahead, per action.
const (
	// ElicitDecline answers {"action":"decline"}.
	ElicitDecline = "decline"
	// ElicitDefaults accepts with the requested schema's defaults.
	ElicitDefaults = "defaults"
	// ElicitValues accepts with the author's values over the defaults.
	ElicitValues = "values"
)

// methodElicitationCreate is the server request asking the user for input.
const methodElicitationCreate = "elicitation/create"

// maxElicitations bounds the elicitation requests one exchange answers
// with anything but a decline: a server that keeps asking gets declines.
const maxElicitations = 16

// ElicitationPolicy says how a call answers elicitation/create: a server
// may only ask when the client declared the capability (Config.Elicitation).
type ElicitationPolicy struct {
	Mode   string         // ElicitDecline, ElicitDefaults or ElicitValues
	Values map[string]any // ElicitValues: answers by property name
}

type elicitKey struct{}

// withElicitation carries a call's policy to the exchange answering its
// server requests.
func withElicitation(ctx context.Context, p *ElicitationPolicy) context.Context {
	if p == nil {
		return ctx
	}
	return context.WithValue(ctx, elicitKey{}, p)
}

func elicitationOf(ctx context.Context) *ElicitationPolicy {
	p, _ := ctx.Value(elicitKey{}).(*ElicitationPolicy)
	return p
}

// elicitResult is the ElicitResult agentctl sends for params under p: a
// decline unless every required property gets a value that fits its
// declared primitive type and enum. A nil p declines (the capability was
// declared for another call of the session). URL-mode requests are
// declined: nobody can visit the URL.
func (p *ElicitationPolicy) elicitResult(params json.RawMessage) json.RawMessage {
	decline := json.RawMessage(`{"action":"decline"}`)
	if p == nil || p.Mode == ElicitDecline || (p.Mode != ElicitDefaults && p.Mode != ElicitValues) {
		return decline
	}
	var req struct {
		Mode   string `json:"mode"`
		Schema struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		} `json:"requestedSchema"`
	}
	if strictUnmarshal(params, &req) != nil || (req.Mode != "" && req.Mode != "form") {
		return decline
	}
	content := map[string]any{}
	for name, raw := range req.Schema.Properties {
		var prop struct {
			Type    string            `json:"type"`
			Default json.RawMessage   `json:"default"`
			Enum    []json.RawMessage `json:"enum"`
		}
		if json.Unmarshal(raw, &prop) != nil {
			continue
		}
		var v any
		if given, ok := p.Values[name]; ok && p.Mode == ElicitValues {
			v = given
		} else if present(prop.Default) {
			if json.Unmarshal(prop.Default, &v) != nil {
				continue
			}
		} else {
			continue
		}
		if !fitsPrimitive(prop.Type, prop.Enum, v) {
			if slices.Contains(req.Schema.Required, name) {
				return decline
			}
			continue
		}
		content[name] = v
	}
	for _, name := range req.Schema.Required {
		if _, ok := content[name]; !ok {
			return decline
		}
	}
	out, err := canonjson.Marshal(map[string]any{"action": "accept", "content": content})
	if err != nil {
		return decline
	}
	return out
}

// fitsPrimitive reports whether v is of the form-mode primitive type typ
// (string, number, integer, boolean; "" accepts those four) and, when
// enum is given, one of its members.
func fitsPrimitive(typ string, enum []json.RawMessage, v any) bool {
	switch x := v.(type) {
	case string:
		if typ != "" && typ != "string" {
			return false
		}
	case float64:
		if typ != "" && typ != "number" && !(typ == "integer" && x == math.Trunc(x)) {
			return false
		}
	case bool:
		if typ != "" && typ != "boolean" {
			return false
		}
	default:
		return false
	}
	if len(enum) == 0 {
		return true
	}
	b, err := json.Marshal(v)
	if err != nil {
		return false
	}
	for _, e := range enum {
		var ev any
		if json.Unmarshal(e, &ev) == nil {
			if eb, err := json.Marshal(ev); err == nil && string(eb) == string(b) {
				return true
			}
		}
	}
	return false
}
