package spec

import (
	"strings"
	"testing"
)

// TestCheck_ConcurrencyRetryTimeout: the keys of the task graph and of
// retries are checked with the file:line of the value at fault.
func TestCheck_ConcurrencyRetryTimeout(t *testing.T) {
	base := wf(task("a", nil, ""))
	tests := []struct {
		name, from, to, want string
	}{
		{"concurrency 0", "  policy:", "  concurrency: 0\n  policy:", "t.yaml:5:16: spec.concurrency: concurrency must be at least 1, got 0"},
		{"concurrency not a number", "  policy:", "  concurrency: many\n  policy:", "t.yaml:5:16: spec.concurrency: expected an integer"},
		{"retry without maxAttempts", "{ kind: mcp.call }", "{ kind: mcp.call, retry: { initialIntervalSeconds: 1 } }", "spec.actions.a.retry.maxAttempts: retry.maxAttempts is required"},
		{"retry maxAttempts 0", "{ kind: mcp.call }", "{ kind: mcp.call, retry: { maxAttempts: 0 } }", "spec.actions.a.retry.maxAttempts: retry.maxAttempts must be at least 1, got 0"},
		{"retry backoff below 1", "{ kind: mcp.call }", "{ kind: mcp.call, retry: { maxAttempts: 2, backoffFactor: 0.5 } }", "spec.actions.a.retry.backoffFactor: retry.backoffFactor must be at least 1, got 0.5"},
		{"timeoutSeconds 0", "      uses: action:a\n", "      uses: action:a\n      timeoutSeconds: 0\n", "spec.tasks[0].timeoutSeconds: timeoutSeconds must be at least 1, got 0"},
		{"continueOnError not a bool", "      uses: action:a\n", "      uses: action:a\n      continueOnError: yes please\n", "spec.tasks[0].continueOnError: expected true or false"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.Replace(base, tc.from, tc.to, 1)
			_, err := Parse("t.yaml", []byte(src))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want it to contain %q\n%s", err, tc.want, src)
			}
		})
	}
	w := mustParse(t, strings.Replace(base, "  policy:", "  concurrency: 2\n  policy:", 1))
	if w.TaskConcurrency() != 2 || mustParse(t, base).TaskConcurrency() != DefaultConcurrency {
		t.Fatalf("TaskConcurrency = %d / %d", w.TaskConcurrency(), mustParse(t, base).TaskConcurrency())
	}
	w = mustParse(t, strings.Replace(base, "{ kind: mcp.call }", "{ kind: mcp.call, retry: { maxAttempts: 3, initialIntervalSeconds: 0.5, backoffFactor: 1.5, maxIntervalSeconds: 10 } }", 1))
	if r := w.Spec.Actions["a"].Retry; r == nil || *r != (RetrySpec{MaxAttempts: 3, InitialIntervalSeconds: 0.5, BackoffFactor: 1.5, MaxIntervalSeconds: 10}) {
		t.Fatalf("retry = %+v", r)
	}
}
