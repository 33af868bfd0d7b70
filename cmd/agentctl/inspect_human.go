package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/agentctl/agentctl/internal/termtext"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/projector/report"
)

// Bounds of the outputs human inspect prints (--output json has them whole).
const (
	inspectOutputLines = 40
	inspectOutputBytes = 4096
)

// printInspect writes the human summary: the run, its outputs, its tasks
// with durations, one row per protocol session, and each call with its
// frames at times relative to the run's start.
func printInspect(w io.Writer, d *projector.Document) {
	r := d.Run
	start, _ := time.Parse(time.RFC3339Nano, r.StartedAt)
	fmt.Fprintf(w, "run       %s\nworkflow  %s (%s)\nstate     %s\nstarted   %s\n", r.RunID, clean(r.Workflow), r.Mode, r.State, wallClock(r.StartedAt))
	if r.FinishedAt != nil {
		fmt.Fprintf(w, "finished  %s (took %s)\n", since(start, *r.FinishedAt), span(r.StartedAt, r.FinishedAt))
	}
	if r.Error != nil {
		lines := strings.Split(strings.TrimRight(report.SettledError(*r.Error, d.Effects), "\n"), "\n")
		fmt.Fprintf(w, "error     %s\n", termtext.Block(lines[0]))
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "          %s\n", termtext.Block(l))
		}
	}
	fmt.Fprintf(w, "events    %d   calls %d   sessions %d\n", r.Events, r.Calls, countSessions(d.ProtocolSessions))
	printOutputs(w, d.Outputs)

	fmt.Fprintln(w, "\ntasks")
	tasks := table{}
	for _, t := range d.Tasks {
		tasks.add("", clean(t.TaskID), fmt.Sprintf("attempt %d", t.Attempt), t.State, deref(t.Server)+"/"+deref(t.Tool),
			"at "+since(start, t.StartedAt), "took "+span(t.StartedAt, t.FinishedAt))
	}
	tasks.write(w, "  ")

	fmt.Fprintln(w, "\nsessions")
	sessions := table{}
	for _, s := range groupSessions(d.ProtocolSessions, d.ProtocolCalls) {
		sessions.add("", clean(s.remote), fmt.Sprintf("gen %d", s.generation), s.status, s.transport, s.protocol,
			"at "+since(start, s.created), "tasks "+strings.Join(s.tasks, ","))
	}
	sessions.write(w, "  ")

	if len(d.AuthSteps) > 0 {
		fmt.Fprintln(w, "\nauth")
		auth := table{}
		for _, s := range d.AuthSteps {
			auth.add("", clean(s.Remote), clean(s.Kind), clean(s.Issuer), clean(s.ClientID), clean(strings.Join(s.Scopes, " ")),
				clean(strings.TrimSpace(s.Method+" "+s.Detail)), "at "+since(start, s.At))
		}
		auth.write(w, "  ")
	}

	fmt.Fprintln(w, "\ncalls")
	calls := table{}
	settled := map[string]bool{}
	for _, e := range d.Effects {
		settled[e.EffectID] = true
	}
	for _, c := range d.ProtocolCalls {
		var notes []string
		if c.Error != nil {
			msg := *c.Error
			if settled[c.EffectID] { // reconciled: the how-to no longer applies
				msg = report.WithoutHowTo(msg)
			}
			for i, l := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
				if i == 0 {
					notes = append(notes, "  error: "+termtext.Block(l))
				} else {
					notes = append(notes, "    "+termtext.Block(l))
				}
			}
		}
		from := ""
		for _, e := range d.StreamEvents {
			if e.EffectID == nil || *e.EffectID != c.EffectID {
				continue
			}
			at := since(start, e.At)
			if e.SourceRunID != nil {
				if *e.SourceRunID != from {
					from = *e.SourceRunID
					notes = append(notes, fmt.Sprintf("  frames recorded by %s (seq and time are that run's)", from))
				}
				at = wallClock(e.At)
			}
			notes = append(notes, fmt.Sprintf("  %-9s #%-4d %-18s %-3s %s", at, e.Seq, e.Type, e.Dir, frameWhat(e)))
		}
		calls.add(strings.Join(notes, "\n"), c.EffectID[:12], clean(c.TaskID), clean(c.Server)+"/"+clean(c.Tool), c.Idempotency,
			fmt.Sprintf("gen %d", c.Generation), c.Status, fmt.Sprintf("reconnects %d", c.Redispatches), "took "+span(c.CreatedAt, &c.UpdatedAt))
	}
	calls.write(w, "  ")
	if len(d.Effects) > 0 {
		fmt.Fprintln(w, "\nreconciliations")
		for _, e := range d.Effects {
			fmt.Fprintf(w, "  %s  %s  %s  at %s\n", e.EffectID[:12], e.Status, clean(e.Reason), since(start, e.ReconciledAt))
		}
	}
}

// frameWhat names what a frame carries: its method, or "response" for
// the answer to a request (which has none).
func frameWhat(e projector.StreamEvent) string {
	switch {
	case e.Method != nil && *e.Method != "":
		return clean(*e.Method)
	case strings.HasSuffix(e.Type, "response"):
		return "response"
	}
	return "-"
}

// printOutputs writes the run's outputs, bounded per value in lines and
// bytes; nothing when it has none.
func printOutputs(w io.Writer, raw json.RawMessage) {
	var outs map[string]any
	if len(raw) == 0 || json.Unmarshal(raw, &outs) != nil || len(outs) == 0 {
		return
	}
	fmt.Fprintln(w, "\noutputs")
	keys := make([]string, 0, len(outs))
	for k := range outs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		writeField(w, "  ", k, bounded(outs[k]))
	}
}

// bounded cuts a value printed for a human to inspectOutputLines lines and
// inspectOutputBytes bytes, saying what was left out.
func bounded(v any) any {
	s, ok := v.(string)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil || len(b) <= inspectOutputBytes {
			return v
		}
		s = string(b)
	}
	cut := false
	if len(s) > inspectOutputBytes {
		s, cut = strings.ToValidUTF8(s[:inspectOutputBytes], ""), true
	}
	if lines := strings.Split(s, "\n"); len(lines) > inspectOutputLines {
		s, cut = strings.Join(lines[:inspectOutputLines], "\n"), true
	}
	if cut {
		s += "\n… (cut; --output json has it whole)"
	}
	return s
}

// session is one protocol session of a run: the rows of every task that
// used it, folded.
type session struct {
	remote, status, transport, protocol, created string
	generation                                   int
	tasks                                        []string
}

// groupSessions folds the protocol_sessions rows into one per session, in
// the order they opened, with the tasks that used it: the task that opened
// it, then those whose calls ran on it (calls' server and generation). Logs
// written before one row per session keep a row per task that used it;
// they fold the same way, the status being the last row's.
func groupSessions(ss []projector.SessionView, calls []projector.CallView) []*session {
	var out []*session
	by := map[string]*session{}
	byGen := map[string]*session{}
	for _, s := range ss {
		key := fmt.Sprintf("%s\x00%d\x00", s.Remote, s.Generation)
		if s.SessionIDDigest != nil {
			key += *s.SessionIDDigest
		}
		g := by[key]
		if g == nil {
			g = &session{remote: s.Remote, generation: s.Generation, transport: s.Transport, protocol: deref(s.ProtocolVersion), created: s.CreatedAt}
			by[key] = g
			byGen[fmt.Sprintf("%s\x00%d", s.Remote, s.Generation)] = g
			out = append(out, g)
		}
		g.status = s.Status
		g.addTask(clean(s.TaskID))
	}
	for _, c := range calls {
		if g := byGen[fmt.Sprintf("%s\x00%d", c.Server, c.Generation)]; g != nil {
			g.addTask(clean(c.TaskID))
		}
	}
	return out
}

// addTask lists task once.
func (g *session) addTask(task string) {
	if !slices.Contains(g.tasks, task) {
		g.tasks = append(g.tasks, task)
	}
}

// since is t's offset from the run's start ("+1.204s"); "-" when t is not a time.
func since(start time.Time, t string) string {
	at, err := time.Parse(time.RFC3339Nano, t)
	if err != nil || start.IsZero() {
		return "-"
	}
	return "+" + at.Sub(start).Round(time.Millisecond).String()
}

// span is the duration from start to end ("-" while end is unset).
func span(start string, end *string) string {
	if end == nil {
		return "-"
	}
	s, err1 := time.Parse(time.RFC3339Nano, start)
	e, err2 := time.Parse(time.RFC3339Nano, *end)
	if err1 != nil || err2 != nil {
		return "-"
	}
	return e.Sub(s).Round(time.Millisecond).String()
}

// wallClock prints a recorded time to the millisecond, in UTC.
func wallClock(t string) string {
	at, err := time.Parse(time.RFC3339Nano, t)
	if err != nil {
		return clean(t)
	}
	return at.UTC().Format("2006-01-02 15:04:05.000 UTC")
}
