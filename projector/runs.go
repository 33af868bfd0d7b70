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
	q := `SELECT run_id, workflow, mode, source_run_id, state, started_at, finished_at, calls FROM runs ORDER BY started_at DESC, run_id DESC`
	var args []any
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	out := []RunSummary{}
	if err := db.SQL().SelectContext(ctx, &out, q, args...); err != nil {
		return nil, &events.Error{Op: "list runs", Path: db.Path(), Err: err}
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
