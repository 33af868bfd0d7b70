package replay

import (
	"context"
	"fmt"
	"sort"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// Replay is everything needed to re-run a recorded run.
type Replay struct {
	SourceRunID string
	Workflow    *spec.Workflow
	Inputs      map[string]any
	Dialer      *Dialer
	// Command is the source's run.created command: "mcp tools" runs are
	// replayed with Runner.ListToolsWith, not Run.
	Command string
}

// Prepare loads the workflow source and inputs stored in the source
// run's run.created and indexes its evidence. It refuses an unknown run
// (projector.ErrUnknownRun) and an unfinished one (workflow.ErrRunNotFinished).
func Prepare(ctx context.Context, db *events.DB, sourceRunID string) (*Replay, error) {
	d, err := NewDialer(ctx, db, sourceRunID)
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

// Dialer is a [Dialer] whose sessions answer from a recorded run. It
// ignores the transport configuration entirely: no socket, no DNS, no
// secret. Its sessions implement [Session] and [Recorded].
type Dialer struct{ src *replaySource }

// NewDialer indexes the evidence of sourceRunID.
func NewDialer(ctx context.Context, db *events.DB, sourceRunID string) (*Dialer, error) {
	src, err := loadReplaySource(ctx, db, sourceRunID)
	if err != nil {
		return nil, err
	}
	return &Dialer{src: src}, nil
}

// Dial returns the recorded remote; cfg is not used.
func (d *Dialer) Dial(remote string, _ transport.Config) (workflow.Conn, error) {
	return &replayConn{src: d.src, remote: remote}, nil
}

// Unused lists recorded calls (and sends) the replay never asked for, as
// "task/attempt/ordinal"; empty after a faithful replay.
func (d *Dialer) Unused() []string {
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
