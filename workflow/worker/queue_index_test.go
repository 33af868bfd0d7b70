package worker_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/workflow/worker"
)

// TestCandidatesUseIndexes: on SQLite the worker's two lists are read
// through the partial indexes of migration 0021, not by scanning every run
// ever recorded (a drain beside thousands of finished runs took several
// times longer per run than in a fresh database).
func TestCandidatesUseIndexes(t *testing.T) {
	db := testkit.OpenDB(t, filepath.Join(t.TempDir(), "a.db"), events.Options{})
	for q, index := range map[string]string{worker.RunningRunsSQL: "runs_running", worker.QueuedRunsSQL: "runs_queued"} {
		var args []any
		if strings.Contains(q, "?") {
			args = append(args, 8)
		}
		rows, err := db.SQL().Query("EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("explain %q: %v", q, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		if err := rows.Close(); err != nil {
			t.Fatal(err)
		}
		got := strings.Join(plan, "; ")
		if !strings.Contains(got, "INDEX "+index) || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("plan of %q = %q; want it read through %s, in its order", q, got, index)
		}
	}
}
