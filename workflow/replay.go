package workflow

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow/spec"
)

// Replay (docs/ARCHITECTURE.md, "Replay") re-runs a recorded workflow against its own evidence.
//
// The source run is indexed once: sessions by (remote, generation), calls by
// (task, attempt, ordinal), and each call's sends ("dispatches") in order,
// each with the frames it produced and its outcome (a result, or the error
// with the trigger the state machine fired). The run loop then drives a
// normal run whose Dialer is a [ReplayDialer]: every Connect, ListTools and
// CallTool is answered from the index, and a recorded failure comes back as
// the same failure, so the state machine takes the same decisions. Nothing
// here opens a socket or resolves a secret.
//
// Evidence is referenced, not copied: where a live run records frames, the
// replay records one replay.frames event per group of recorded frames (a
// session's initialize, its tools/list, one send of a call), naming the run
// that holds them, their seq spans, their count and the chain hash of the
// last one. Indexing reads each frame's members up to its body (responses
// whole, they rebuild results), so a replay costs a read of the source and a
// few writes, whatever the size of the evidence; inspect shows the
// referenced frames as the replay's own.
//
// A replay of a replay indexes the replay's references (reading the
// referenced responses); its own references name the run that holds the
// frames, while its source links (sourceRunId, sourceEffectId) name the
// replay, one hop at a time.

// KindDivergence is the error kind of a replay whose workflow asked for a
// call other than the recorded one.
const KindDivergence transport.Kind = "replay_divergence"

// ErrRunNotFinished refuses to replay a run that has no run.finished event.
var ErrRunNotFinished = errors.New("run is not finished")

// DivergenceError is the first difference between what a replay asks for
// and what the source run recorded. The CLI maps it to exit code 4.
type DivergenceError struct {
	SourceRunID string
	TaskID      string
	Attempt     int
	Field       string // "call", "server", "tool", "argumentsDigest", "dispatch", "session", "task"
	Recorded    string
	Replayed    string
}

func (e *DivergenceError) Error() string {
	return fmt.Sprintf("replay diverged from %s at task %q (attempt %d): %s: recorded %s, replay asks %s",
		e.SourceRunID, e.TaskID, e.Attempt, e.Field, e.Recorded, e.Replayed)
}

// Unwrap makes a divergence a definitive failure for the state machine (a
// transport error that was never sent) and a failure decided by agentctl
// (exit 4), so the replay run ends failed, never uncertain.
func (e *DivergenceError) Unwrap() []error {
	return []error{&transport.Error{Op: "replay", Kind: KindDivergence, Message: e.Field},
		&callFailure{kind: KindDivergence, msg: e.Error()}}
}

// isDivergence reports whether err is a replay's divergence from its source.
func isDivergence(err error) bool {
	var de *DivergenceError
	return errors.As(err, &de)
}

// Replay is everything needed to re-run a recorded run.
type Replay struct {
	SourceRunID string
	Workflow    *spec.Workflow
	Inputs      map[string]any
	Dialer      *ReplayDialer
	// Command is the source's run.created command: "mcp tools" runs are
	// replayed with Runner.ListToolsWith, not Run.
	Command string
}

// PrepareReplay loads the workflow source and inputs stored in the source
// run's run.created and indexes its evidence. It refuses an unknown run
// (projector.ErrUnknownRun) and an unfinished one (ErrRunNotFinished).
func PrepareReplay(ctx context.Context, db *events.DB, sourceRunID string) (*Replay, error) {
	d, err := NewReplayDialer(ctx, db, sourceRunID)
	if err != nil {
		return nil, err
	}
	c := d.src.created
	wf, err := spec.Parse(c.File, []byte(c.Source))
	if err != nil {
		return nil, fmt.Errorf("replay %s: recorded workflow: %w", sourceRunID, err)
	}
	return &Replay{SourceRunID: sourceRunID, Workflow: wf, Inputs: d.src.inputs, Dialer: d, Command: c.Command}, nil
}

// ReplayDialer is a [Dialer] whose sessions answer from a recorded run. It
// ignores the transport configuration entirely: no socket, no DNS, no
// secret. Its sessions implement [Session] and [Recorded].
type ReplayDialer struct{ src *replaySource }

// NewReplayDialer indexes the evidence of sourceRunID.
func NewReplayDialer(ctx context.Context, db *events.DB, sourceRunID string) (*ReplayDialer, error) {
	src, err := loadReplaySource(ctx, db, sourceRunID)
	if err != nil {
		return nil, err
	}
	return &ReplayDialer{src: src}, nil
}

// Dial returns the recorded remote; cfg is not used.
func (d *ReplayDialer) Dial(remote string, _ transport.Config) (Conn, error) {
	return &replayConn{src: d.src, remote: remote}, nil
}

// Unused lists recorded calls (and sends) the replay never asked for, as
// "task/attempt/ordinal"; empty after a faithful replay.
func (d *ReplayDialer) Unused() []string {
	var out []string
	for k, c := range d.src.calls {
		if c.next < len(c.sends) {
			out = append(out, fmt.Sprintf("%s/%d/%d (%d of %d sends replayed)", k.task, k.attempt, k.ordinal, c.next, len(c.sends)))
		}
		for i, s := range c.sends {
			if t := s.task; t != nil && t.next < len(t.steps) {
				out = append(out, fmt.Sprintf("%s/%d/%d send %d (%d of %d task requests replayed)", k.task, k.attempt, k.ordinal, i+1, t.next, len(t.steps)))
			}
		}
	}
	sort.Strings(out)
	return out
}
