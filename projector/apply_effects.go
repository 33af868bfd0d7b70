package projector

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/events"
)

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
