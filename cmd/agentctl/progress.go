package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

// progress prints one line per persisted step a human cares about, on stderr.
type progress struct{ w io.Writer }

func newProgress(w io.Writer) *progress { return &progress{w: w} }

func (p *progress) observe(e events.Event) {
	switch e.Type {
	case projector.TypeTaskStarted:
		var t projector.TaskStarted
		if e.Decode(&t) == nil && t.Tool != "" {
			fmt.Fprintf(p.w, "▶ %s  %s/%s (%s)\n", t.TaskID, t.Server, t.Tool, t.Idempotency)
		}
	case projector.TypeSessionOpened:
		var s projector.SessionOpened
		if e.Decode(&s) == nil {
			fmt.Fprintf(p.w, "  session %s generation %d (%s)\n", s.Remote, s.Generation, s.ProtocolVersion)
		}
	case projector.TypeCallTransition:
		var t projector.CallTransition
		if e.Decode(&t) == nil && t.To != "dispatched" {
			reason := ""
			if t.Reason != "" {
				reason = ": " + clean(t.Reason)
			}
			fmt.Fprintf(p.w, "  call %s → %s%s\n", t.EffectID[:12], t.To, reason)
		}
	case projector.FramePrefix + "notification":
		var f projector.Frame
		if e.Decode(&f) != nil || f.Method != "notifications/progress" {
			return
		}
		var n struct {
			Params struct {
				Progress float64  `json:"progress"`
				Total    *float64 `json:"total"`
				Message  string   `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(f.Body, &n) != nil {
			return
		}
		if n.Params.Total != nil {
			fmt.Fprintf(p.w, "  progress %g/%g %s\n", n.Params.Progress, *n.Params.Total, clean(n.Params.Message))
		} else {
			fmt.Fprintf(p.w, "  progress %g %s\n", n.Params.Progress, clean(n.Params.Message))
		}
	case projector.TypeTaskFinished:
		var t projector.TaskFinished
		if e.Decode(&t) == nil {
			fmt.Fprintf(p.w, "  %s %s\n", t.TaskID, t.State)
		}
	}
}

// clean neutralises control characters and escapes in remote text.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '�'
		}
		return r
	}, s)
}

// humanValue prints strings bare and everything else as compact JSON.
func humanValue(v any) string {
	if s, ok := v.(string); ok {
		return clean(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clean(string(b))
}
