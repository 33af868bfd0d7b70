package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
)

// eventView is an event as the CLI prints it in json and jsonl: the stored
// row, with its payload as the JSON object it is (an encrypted payload is
// its envelope object), not a string holding JSON.
type eventView struct {
	RunID     string          `json:"runId"`
	Seq       int64           `json:"seq"`
	Stream    string          `json:"stream"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
	CreatedAt string          `json:"createdAt"`
	PrevHash  string          `json:"prevHash"`
	Hash      string          `json:"hash"`
}

func viewEvent(e events.Event) eventView {
	p := json.RawMessage(e.Payload)
	if !json.Valid(p) { // never expected: the log stores JSON
		p, _ = json.Marshal(e.Payload)
	}
	return eventView{RunID: e.RunID, Seq: e.Seq, Stream: e.Stream, Type: e.Type, Payload: p, CreatedAt: e.CreatedAt, PrevHash: e.PrevHash, Hash: e.Hash}
}

// printEvent writes one event: an Event envelope in json and jsonl, a line
// for a human.
func (a *app) printEvent(e events.Event) error {
	if a.output != "human" {
		return a.printJSON(a.stdout, "Event", true, viewEvent(e))
	}
	what := ""
	if strings.HasPrefix(e.Type, vocab.FramePrefix) {
		f, err := vocab.DecodeFrame(e)
		if err != nil {
			return err
		}
		what = "  " + f.Dir + " " + clean(f.Method)
	}
	_, err := fmt.Fprintf(a.stdout, "#%-5d %s  %-18s %s%s\n", e.Seq, e.CreatedAt, clean(e.Type), clean(e.Stream), what)
	return err
}

// followPoll is how often --follow reads the log for new events; idleProbe
// is how long it waits without one before it asks whether any process
// still holds the run.
const (
	followPoll = 100 * time.Millisecond
	idleProbe  = 2 * time.Second
)

// errNotRunning ends a follow of a run that no process is writing.
var errNotRunning = errors.New("no process is writing it (killed?)")

// follow prints runID's events as they commit, from the first, until the
// run's last run.* event is run.finished; it ends early, with an error,
// when the run stops growing and no process holds it. For a human it
// prints what run prints (progress.observe): tasks started and ended, each
// call's state change from → to with its reason, progress, retries; then
// the summary, the outputs and how the run ended. json and jsonl print
// every event as it is.
func (a *app) follow(ctx context.Context, db *events.DB, runID string) error {
	show := a.printEvent
	var end *vocab.RunFinished
	mode := "" // from run.created: no resume is suggested for a replay or a check
	if a.output == "human" {
		p := newProgress(a.stdout, a.color)
		p.tty, p.from = false, true // plain lines, whatever stdout is
		a.prog = p                  // execute ends it (summary) however the follow ends
		show = func(e events.Event) error {
			p.observe(e)
			if e.Type == vocab.TypeRunCreated {
				c, err := vocab.Decode[vocab.RunCreated](e)
				if err == nil {
					mode = c.Mode
				}
			}
			if e.Type == vocab.TypeRunFinished {
				f, err := vocab.Decode[vocab.RunFinished](e)
				if err != nil {
					f = vocab.RunFinished{State: "finished"}
				}
				end = &f
			}
			return nil
		}
	}
	var after int64
	finished := false
	idleSince := time.Now()
	tick := time.NewTicker(followPoll)
	defer tick.Stop()
	for {
		n := 0
		err := db.Scan(ctx, runID, after, func(e events.Event) error {
			n++
			after = e.Seq
			switch e.Type {
			case vocab.TypeRunFinished:
				finished = true
			case vocab.TypeRunCreated, vocab.TypeRunResumed, "run.started":
				finished = false
			}
			return show(e)
		})
		if err != nil {
			return err
		}
		if finished {
			if end != nil {
				return a.followEnd(ctx, db, runID, mode, end)
			}
			return nil
		}
		if n > 0 {
			idleSince = time.Now()
		} else if time.Since(idleSince) >= idleProbe {
			// Nobody writes the run (no lock, no live lease): it will not
			// end by itself. The probe takes nothing (no lease epoch).
			if held, err := db.RunHeld(ctx, runID); err == nil && !held {
				return &exitError{code: workflow.ExitInvalid, runID: runID,
					err: fmt.Errorf("follow %s: %w; it can be resumed: agentctl resume %s", runID, errNotRunning, runID)}
			}
			idleSince = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// followEnd closes a human follow as run closes a run: the summary, the
// outputs, the state, and the command that applies next.
func (a *app) followEnd(ctx context.Context, db *events.DB, runID, mode string, end *vocab.RunFinished) error {
	a.prog.summary()
	keys := make([]string, 0, len(end.Outputs))
	for k := range end.Outputs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		writeField(a.stdout, "", k, end.Outputs[k])
	}
	fmt.Fprintf(a.stdout, "run %s %s\n", runID, clean(end.State))
	if end.Error != "" {
		writeField(a.stdout, "", "error", end.Error)
	}
	tasks, err := projector.Tasks(ctx, db, runID)
	if err != nil {
		return err
	}
	for _, c := range nextCommands(runID, mode, end.State, anyUncertain(tasks)) {
		fmt.Fprintf(a.stdout, "next: %s\n", c)
	}
	return nil
}
