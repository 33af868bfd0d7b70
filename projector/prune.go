package projector

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// PruneOptions select the runs `agentctl runs prune` removes. The zero
// value selects every finished run (`runs prune --keep 0`).
type PruneOptions struct {
	// Before, when not zero, selects runs started before it.
	Before time.Time
	// Keep, when positive, keeps the newest Keep runs (in State, when set)
	// and selects the older ones; 0 keeps none (the CLI's --keep 0).
	Keep int
	// State, when set, limits the selection to runs in that state.
	State string
}

// PruneRun is a run a prune removes, with its event count.
type PruneRun struct {
	RunSummary
	Events int64 `json:"events"`
}

// KeptRun is a run the selection named that a prune keeps, and why.
type KeptRun struct {
	RunID  string `json:"runId"`
	Reason string `json:"reason"`
}

// PrunePlan is what a prune will remove and what it keeps.
type PrunePlan struct {
	Prune  []PruneRun `json:"prune"`
	Kept   []KeptRun  `json:"kept"`
	Events int64      `json:"events"`
}

// IDs are the runs the plan removes.
func (p *PrunePlan) IDs() []string {
	ids := make([]string, len(p.Prune))
	for i, r := range p.Prune {
		ids[i] = r.RunID
	}
	return ids
}

// PlanPrune selects finished runs by o and keeps back any run whose frames
// a replay that stays references (replay.frames), unless that replay goes
// too. A run that has not finished is never selected.
func PlanPrune(ctx context.Context, db *events.DB, o PruneOptions) (*PrunePlan, error) {
	all, err := FindRuns(ctx, db, RunFilter{State: o.State})
	if err != nil {
		return nil, err
	}
	plan := &PrunePlan{Prune: []PruneRun{}, Kept: []KeptRun{}}
	chosen := map[string]bool{}
	for i, r := range all { // newest first
		if o.Keep > 0 && i < o.Keep {
			continue
		}
		if !o.Before.IsZero() {
			t, err := time.Parse(time.RFC3339Nano, r.StartedAt)
			if err != nil || !t.Before(o.Before) {
				continue
			}
		}
		if r.FinishedAt == nil {
			plan.Kept = append(plan.Kept, KeptRun{RunID: r.RunID, Reason: "not finished (" + r.State + ")"})
			continue
		}
		chosen[r.RunID] = true
	}
	refs, err := replayReferences(ctx, db)
	if err != nil {
		return nil, err
	}
	// A kept replay keeps its sources; keeping a source that is itself a
	// replay keeps its sources in turn.
	for changed := true; changed; {
		changed = false
		replays := make([]string, 0, len(refs))
		for rp := range refs {
			replays = append(replays, rp)
		}
		sort.Strings(replays)
		for _, rp := range replays {
			if chosen[rp] {
				continue
			}
			for _, src := range refs[rp] {
				if chosen[src] {
					delete(chosen, src)
					plan.Kept = append(plan.Kept, KeptRun{RunID: src, Reason: "its frames are referenced by replay " + rp + ", which is kept"})
					changed = true
				}
			}
		}
	}
	for _, r := range all {
		if !chosen[r.RunID] {
			continue
		}
		pr := PruneRun{RunSummary: r}
		if err := db.SQL().GetContext(ctx, &pr.Events, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?`, r.RunID); err != nil {
			return nil, &events.Error{Op: "plan prune", Path: db.Path(), Err: err}
		}
		plan.Events += pr.Events
		plan.Prune = append(plan.Prune, pr)
	}
	return plan, nil
}

// replayReferences maps each replay run to the runs whose frames its
// replay.frames events reference.
func replayReferences(ctx context.Context, db *events.DB) (map[string][]string, error) {
	var replays []string
	if err := db.SQL().SelectContext(ctx, &replays, `SELECT run_id FROM runs WHERE mode = 'replay' ORDER BY run_id`); err != nil {
		return nil, &events.Error{Op: "plan prune: list replays", Path: db.Path(), Err: err}
	}
	refs := map[string][]string{}
	for _, rp := range replays {
		seen := map[string]bool{}
		err := db.ScanPayloads(ctx, rp, func(e events.Event) error {
			if e.Type != vocab.TypeReplayFrames {
				return nil
			}
			f, err := vocab.Decode[vocab.ReplayFrames](e)
			if err != nil {
				return fmt.Errorf("plan prune: replay.frames at seq %d of %s: %w", e.Seq, rp, err)
			}
			if !seen[f.SourceRunID] {
				seen[f.SourceRunID] = true
				refs[rp] = append(refs[rp], f.SourceRunID)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return refs, nil
}

// Prune removes the plan's runs, their events and their projection rows,
// in one transaction (events.DB.Prune).
func Prune(ctx context.Context, db *events.DB, plan *PrunePlan) error {
	if len(plan.Prune) == 0 {
		return nil
	}
	return db.Prune(ctx, plan.IDs(), func(ctx context.Context, tx *events.Tx, runID string) error {
		for _, t := range projectionTables {
			if _, err := tx.ExecContext(ctx, `DELETE FROM `+t+` WHERE run_id = ?`, runID); err != nil {
				return fmt.Errorf("delete %s rows: %w", t, err)
			}
		}
		return nil
	})
}
