package projector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/events"
)

// TypeRunResumed marks where `agentctl resume` picked a run up again: the
// same run id, the seq continuing. Everything before it still stands;
// everything after it is the resumed process.
const TypeRunResumed = "run.resumed"

// RunResumed is the payload of run.resumed.
type RunResumed struct {
	// FromSeq is the last seq the resumed process found in the log.
	FromSeq int64 `json:"fromSeq"`
	// PreviousState is the run's state before the resume: "running" after
	// a crash, or "uncertain" when a reconcile made a finished run resumable.
	PreviousState string `json:"previousState"`
	// Command names what resumed the run ("resume").
	Command string `json:"command,omitempty"`
}

// ErrUnknownCall reports an effect id that no call.prepared event names.
var ErrUnknownCall = errors.New("projector: no such call")

// CallRunID returns the run that holds the call effectID, from the
// protocol_calls projection; an unknown id wraps ErrUnknownCall.
func CallRunID(ctx context.Context, db *events.DB, effectID string) (string, error) {
	var runID string
	err := db.SQL().GetContext(ctx, &runID, `SELECT run_id FROM protocol_calls WHERE effect_id = ?`, effectID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: %q", ErrUnknownCall, effectID)
	}
	if err != nil {
		return "", &events.Error{Op: "find call", Path: db.Path(), Err: err}
	}
	return runID, nil
}
