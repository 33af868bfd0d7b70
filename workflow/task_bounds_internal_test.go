package workflow

import (
	"testing"
	"time"

	"github.com/agentctl/agentctl/workflow/spec"
)

// TestTaskDeadline: a task call ends at the server's maxSeconds or its
// task ttl plus a grace (10%, within [1s, 5m]), whichever comes first; at
// the default bound when neither is set.
func TestTaskDeadline(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name       string
		maxSeconds int
		ttl        time.Duration
		want       time.Duration
		what       string
	}{
		{"neither", 0, 0, defaultTaskBound, "the task bound (1h0m0s by default)"},
		{"maxSeconds", 90, 0, 90 * time.Second, "mcpServers.s.maxSeconds (90s)"},
		{"short ttl: 1s grace", 0, 2 * time.Second, 3 * time.Second, "the server's task ttl (2s) plus 1s"},
		{"ttl: 10% grace", 0, time.Hour, time.Hour + 5*time.Minute, "the server's task ttl (1h0m0s) plus 5m0s"},
		{"ttl: 10% grace", 0, 20 * time.Minute, 22 * time.Minute, "the server's task ttl (20m0s) plus 2m0s"},
		{"maxSeconds first", 60, time.Hour, time.Minute, "mcpServers.s.maxSeconds (60s)"},
		{"ttl first", 7200, time.Minute, time.Minute + 6*time.Second, "the server's task ttl (1m0s) plus 6s"},
		{"ttl beyond the default", 0, 2 * time.Hour, 2*time.Hour + 5*time.Minute, "the server's task ttl (2h0m0s) plus 5m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wf := &spec.Workflow{Spec: spec.Spec{MCPServers: map[string]spec.ServerSpec{"s": {MaxSeconds: tc.maxSeconds}}}}
			c := &call{rn: &run{runState: &runState{wf: wf}}, remote: "s", tb: taskBounds{start: start, ttl: tc.ttl}}
			at, what := c.taskDeadline()
			if at.Sub(start) != tc.want || what != tc.what {
				t.Errorf("deadline after %v (%s); want %v (%s)", at.Sub(start), what, tc.want, tc.what)
			}
		})
	}
}
