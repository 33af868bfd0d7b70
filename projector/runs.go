package projector

import (
	"context"
	"time"

	"github.com/agentctl/agentctl/events"
)

// RunSummary is one line of `agentctl runs list`.
type RunSummary struct {
	RunID       string  `db:"run_id" json:"runId"`
	Workflow    string  `db:"workflow" json:"workflow"`
	Mode        string  `db:"mode" json:"mode"`
	SourceRunID *string `db:"source_run_id" json:"sourceRunId"`
	State       string  `db:"state" json:"state"`
	StartedAt   string  `db:"started_at" json:"startedAt"`
	FinishedAt  *string `db:"finished_at" json:"finishedAt"`
	// DurationMS is finishedAt − startedAt in milliseconds; null while running.
	DurationMS *int64 `db:"-" json:"durationMs"`
	Calls      int    `db:"calls" json:"calls"`
}

// ListRuns returns every run's summary from the runs projection, newest
// first; limit ≤ 0 means all.
func ListRuns(ctx context.Context, db *events.DB, limit int) ([]RunSummary, error) {
	return FindRuns(ctx, db, RunFilter{Limit: limit})
}

// RunFilter selects runs for `runs list` and `runs prune`; the zero value
// selects every run.
type RunFilter struct {
	State    string    // "" = any state
	Workflow string    // "" = any workflow (metadata.name)
	Mode     string    // "" = any mode (RunModes)
	Since    time.Time // zero = any time; else runs started at or after it
	Limit    int       // ≤ 0 = all
}

// FindRuns returns the summaries of the runs f selects, newest first.
func FindRuns(ctx context.Context, db *events.DB, f RunFilter) ([]RunSummary, error) {
	q := `SELECT run_id, workflow, mode, source_run_id, state, started_at, finished_at, (SELECT COUNT(*) FROM protocol_calls c WHERE c.run_id = runs.run_id) AS calls FROM runs WHERE 1 = 1`
	var args []any
	if f.State != "" {
		q += ` AND state = ?`
		args = append(args, f.State)
	}
	if f.Workflow != "" {
		q += ` AND workflow = ?`
		args = append(args, f.Workflow)
	}
	if f.Mode != "" {
		q += ` AND mode = ?`
		args = append(args, f.Mode)
	}
	if !f.Since.IsZero() {
		// started_at is RFC 3339 in UTC with a trimmed fraction: its
		// first 19 characters (to the second) order as time as text; the
		// rows of Since's own second are filtered exactly below.
		q += ` AND substr(started_at, 1, 19) >= ?`
		args = append(args, f.Since.UTC().Format("2006-01-02T15:04:05"))
	}
	q += ` ORDER BY started_at DESC, run_id DESC`
	if f.Limit > 0 && f.Since.IsZero() {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	out := []RunSummary{}
	if err := db.SQL().SelectContext(ctx, &out, q, args...); err != nil {
		return nil, &events.Error{Op: "list runs", Path: db.Path(), Err: err}
	}
	if !f.Since.IsZero() { // exact, below the second the query bounds by
		kept := out[:0]
		for _, r := range out {
			if t, err := time.Parse(time.RFC3339Nano, r.StartedAt); err == nil && !t.Before(f.Since) && (f.Limit <= 0 || len(kept) < f.Limit) {
				kept = append(kept, r)
			}
		}
		out = kept
	}
	for i := range out {
		out[i].DurationMS = duration(out[i].StartedAt, out[i].FinishedAt)
	}
	return out, nil
}

func duration(start string, end *string) *int64 {
	if end == nil {
		return nil
	}
	s, err1 := time.Parse(time.RFC3339Nano, start)
	e, err2 := time.Parse(time.RFC3339Nano, *end)
	if err1 != nil || err2 != nil {
		return nil
	}
	ms := e.Sub(s).Milliseconds()
	return &ms
}

// Tasks returns the task attempts of runID in the order they started.
func Tasks(ctx context.Context, db *events.DB, runID string) ([]TaskView, error) {
	out := []TaskView{}
	if err := db.SQL().SelectContext(ctx, &out, `SELECT * FROM tasks WHERE run_id = ? ORDER BY rowid`, runID); err != nil {
		return nil, &events.Error{Op: "read tasks", Path: db.Path(), Err: err}
	}
	return out, nil
}
