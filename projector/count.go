package projector

import (
	"context"

	"github.com/agentctl/agentctl/events"
)

// QueuedRuns counts the runs waiting for a worker (state "queued" in the
// runs projection): a worker's queue depth, read on every metrics scrape,
// so it is one COUNT and never a listing.
func QueuedRuns(ctx context.Context, db *events.DB) (int64, error) {
	var n int64
	if err := db.SQL().GetContext(ctx, &n, `SELECT COUNT(*) FROM runs WHERE state = 'queued'`); err != nil {
		return 0, &events.Error{Op: "count queued runs", Path: db.Path(), Err: err}
	}
	return n, nil
}
