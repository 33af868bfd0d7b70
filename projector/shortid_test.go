package projector_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
)

// TestShortRunID_AsShortRunIDs: the short form `agentctl run` prints as a
// run starts (ShortRunID, which asks only for the ids a suffix could be
// taken for) is the one ShortRunIDs computes from every id, on both
// backends, including ids that share their last 8 and 9 digits and an id
// whose uuid starts with another's suffix. Each short form resolves to
// its run alone.
func TestShortRunID_AsShortRunIDs(t *testing.T) {
	ids := []string{
		"run-01a2470f-1355-788c-9917-74b6fdf45b1a",
		"run-01a2470f-1356-788c-9917-0000fdf45b1a",  // the same last 8 digits
		"run-6fdf45b1a-0000-7000-8000-000000000001", // its uuid starts with the first's last 9
		"replay-01a2470f-1357-788c-9917-aaaabbbbcccc",
	}
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		db := b.Open(t, events.Options{})
		ctx := context.Background()
		for _, id := range ids {
			rec := []events.Record{{Stream: "run", Type: "test.created", Payload: json.RawMessage(`{}`)}}
			if _, err := db.Append(ctx, id, rec, nil); err != nil {
				t.Fatal(err)
			}
		}
		all, err := projector.ShortRunIDs(ctx, db, ids)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{ids[0]: "b6fdf45b1a", ids[1]: "0fdf45b1a", ids[2]: "00000001", ids[3]: "bbbbcccc"}
		for _, id := range ids {
			got, err := projector.ShortRunID(ctx, db, id)
			if err != nil {
				t.Fatal(err)
			}
			if got != all[id] {
				t.Errorf("ShortRunID(%s) = %q, ShortRunIDs says %q", id, got, all[id])
			}
			if w, ok := want[id]; ok && got != w {
				t.Errorf("ShortRunID(%s) = %q, want %q", id, got, w)
			}
			if r, err := projector.ResolveRun(ctx, db, got); err != nil || r != id {
				t.Errorf("ResolveRun(%q) = %q, %v; want %s", got, r, err, id)
			}
		}
	})
}
