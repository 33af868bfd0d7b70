package workflow_test

import (
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay/replaytest"
)

// The run loop's tests check that what they record replays
// (workflow/replay/replaytest).

func replayOf(t *testing.T, db *events.DB, runID string) *workflow.Result {
	t.Helper()
	return replaytest.Replay(t, db, runID)
}

func normalInspect(t *testing.T, db *events.DB, runID string) (string, *projector.Document) {
	t.Helper()
	return replaytest.NormalInspect(t, db, runID)
}

func inspectDoc(t *testing.T, db *events.DB, runID string) *projector.Document {
	t.Helper()
	return replaytest.InspectDoc(t, db, runID)
}

func blockNetwork(t *testing.T, serverURL string) {
	t.Helper()
	replaytest.BlockNetwork(t, serverURL)
}
