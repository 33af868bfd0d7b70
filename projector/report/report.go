package report

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
)

// Options are the parts of a report its caller supplies; the zero value
// builds a report without reconcile commands.
type Options struct {
	// Reconcile returns the commands that settle an uncertain call of run
	// runID, exactly as the CLI prints them; nil shows none. (The words
	// belong to the command layer, which this package may not import.)
	Reconcile func(runID, effectID string) []string
	// RedispatchBudget returns how many resends after an ambiguous failure
	// the state machine allows a call of the given idempotency class; nil
	// leaves the budget out. (The rule is the fsm's, above this package.)
	RedispatchBudget func(idempotency string) int
}

// Chain is the outcome of checking a run's hash chain.
type Chain struct {
	RunID    string
	Verified bool
	Events   int64
	Version  string // the chain versions met, e.g. "v2"
	Error    string
}

// Report is everything the HTML page shows, built from one read of the
// log: the inspect document and the timeline folded beside it.
type Report struct {
	Doc      *projector.Document
	Database string
	Chain    Chain
	// Source is the chain check of the run a replay references (nil for a
	// live run).
	Source   *Chain
	Start    time.Time
	End      time.Time
	Lanes    []*Lane
	Calls    []*Call
	Sessions []*Session
	RunMarks []RunMark
	// Reconnects counts the sessions opened after the first, per remote.
	Reconnects map[string]int
	Outputs    string
}

// Build reads run runID from db into a Report: the inspect document
// (projector.InspectEach, bounded as inspect is) and, from the same scan of
// the log, the timeline and the chain check. A replay's source run is
// verified too. A broken chain is reported, not returned as an error.
func Build(ctx context.Context, db *events.DB, runID string, opts Options) (*Report, error) {
	f := newFold(runID)
	doc, err := projector.InspectEach(ctx, db, runID, f.add)
	verified, version, chainErr := f.chain.result()
	if err != nil {
		return nil, err
	}
	r := &Report{Doc: doc, Database: db.Path(), Start: f.first, End: f.last, Lanes: f.lanes, Calls: f.calls,
		Sessions: f.sessions, RunMarks: f.runMarks, Reconnects: map[string]int{}}
	r.Chain = Chain{RunID: runID, Verified: chainErr == nil, Events: verified, Version: version}
	if chainErr != nil {
		r.Chain.Error = chainErr.Error()
	}
	if src := doc.Run.SourceRunID; src != nil && *src != "" {
		rc, err := db.VerifyRunChain(ctx, *src)
		r.Source = &Chain{RunID: *src, Verified: err == nil, Events: rc.Events, Version: rc.Chain}
		if err != nil {
			r.Source.Error = err.Error()
		}
	}
	r.join(opts)
	if len(doc.Outputs) > 0 && string(doc.Outputs) != "null" {
		out, err := indent(doc.Outputs)
		if err != nil {
			return nil, fmt.Errorf("report outputs of run %s: %w", runID, err)
		}
		r.Outputs = out
	}
	return r, nil
}

// indent pretty-prints JSON for people: numbers as written, and without
// encoding/json's \u003c escapes, since the page escapes what it shows.
func indent(raw json.RawMessage) (string, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", err
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.SetIndent("", "  ")
	if err := e.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// join attaches the projection rows to the folded calls and sessions, closes
// what the log leaves open at its last event, and counts reconnects.
func (r *Report) join(opts Options) {
	rows := map[string]*projector.CallView{}
	for i := range r.Doc.ProtocolCalls {
		rows[r.Doc.ProtocolCalls[i].EffectID] = &r.Doc.ProtocolCalls[i]
	}
	verdicts := map[string]*projector.EffectView{}
	for i := range r.Doc.Effects {
		verdicts[r.Doc.Effects[i].EffectID] = &r.Doc.Effects[i]
	}
	if run := r.Doc.Run; run.Error != nil {
		if e := SettledError(*run.Error, r.Doc.Effects); e != *run.Error {
			cp := *run // the run's error names a call since reconciled
			cp.Error, r.Doc.Run = &e, &cp
		}
	}
	for _, c := range r.Calls {
		c.Row, c.Reconciled = rows[c.EffectID], verdicts[c.EffectID]
		if c.Row != nil {
			c.Status = c.Row.Status
		}
		if opts.RedispatchBudget != nil {
			b := opts.RedispatchBudget(c.Idempotency)
			c.Budget = &b
		}
		if c.Status == "uncertain" && c.Reconciled == nil && opts.Reconcile != nil {
			c.Reconcile = opts.Reconcile(r.Doc.Run.RunID, c.EffectID)
		}
		if c.Reconciled != nil {
			if c.Row != nil && c.Row.Error != nil {
				row := *c.Row // the document's row stays as inspect read it
				e := WithoutHowTo(*row.Error)
				row.Error, c.Row = &e, &row
			}
			for i := range c.Errors {
				c.Errors[i].Message = WithoutHowTo(c.Errors[i].Message)
			}
		}
	}
	for _, l := range r.Lanes {
		for _, a := range l.Attempts {
			for _, c := range a.Calls {
				if c.Reconciled != nil { // settled: its error no longer says how to settle it
					a.Error = WithoutHowTo(a.Error)
				}
			}
			if !a.Finished {
				a.End = r.End
			}
			for _, c := range a.Calls {
				if !terminal(c.Status) && a.End.After(c.End) {
					c.End = a.End
				}
			}
		}
	}
	srows := map[string]*projector.SessionView{}
	for i := range r.Doc.ProtocolSessions {
		s := &r.Doc.ProtocolSessions[i]
		srows[sessionKey(s.Remote, s.Generation)] = s
	}
	for _, s := range r.Sessions {
		s.Row = srows[sessionKey(s.Remote, s.Generation)]
		if s.Generation > 1 {
			r.Reconnects[s.Remote]++
		}
	}
}

// terminal reports whether a call or task state is final.
func terminal(state string) bool {
	switch state {
	case "succeeded", "failed", "uncertain", "cancelled", "skipped":
		return true
	}
	return false
}

// HowToMarker starts the how-to an uncertain call's error carries (the
// reconcile commands, as workflow.UncertainError words them); once the call
// is reconciled, what is shown stops there.
const HowToMarker = "\ncheck the server, then record what happened"

// WithoutHowTo is the error of a reconciled call as shown: s without the
// reconcile how-to, when it has one (human inspect shows it so too).
func WithoutHowTo(s string) string {
	if i := strings.Index(s, HowToMarker); i >= 0 {
		return s[:i]
	}
	return s
}

// SettledError is a run's (or task's) error as shown once the call it
// names was reconciled: without the how-to.
func SettledError(s string, reconciled []projector.EffectView) string {
	for _, e := range reconciled {
		if strings.Contains(s, "call "+e.EffectID+" ") {
			return WithoutHowTo(s)
		}
	}
	return s
}
