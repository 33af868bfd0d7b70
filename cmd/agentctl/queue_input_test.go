package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCLI_QueueBadInput: what a new user may get wrong with submit, worker,
// --concurrency and the retry, continueOnError and timeoutSeconds keys
// exits 2 (3 for a file only the policy forbids) with a message naming the
// file:line:col and field, or the flag, once, and leaves the database as
// it was: every bad workflow of the language catalogue through submit, and
// each flag of worker and run that takes a count or a duration.
func TestCLI_QueueBadInput(t *testing.T) {
	db, before := seededDB(t)
	src, err := os.ReadFile("../../examples/lookup.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	if err := os.WriteFile(good, src, 0o600); err != nil {
		t.Fatal(err)
	}
	// edited writes lookup.yaml with old replaced by repl.
	edited := func(name, old, repl string) string {
		if !bytes.Contains(src, []byte(old)) {
			t.Fatalf("lookup.yaml has no %q", old)
		}
		p := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(p, bytes.Replace(src, []byte(old), []byte(repl), 1), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const action = "lookup: { kind: mcp.call, idempotency: idempotent }"
	withRetry := func(name, retry string) string {
		return edited(name, action, "lookup: { kind: mcp.call, idempotency: idempotent, retry: "+retry+" }")
	}
	type tc struct {
		name string
		args []string
		want string // a fragment the message must contain exactly once
		code int    // 0 means 2 (invalid input)
		many bool   // the catalogue's files may have several problems: want at least once
	}
	var cases []tc
	files, err := filepath.Glob("../../workflow/spec/testdata/lang/bad/*.yaml")
	if err != nil || len(files) < 30 {
		t.Fatalf("catalogue has %d files (%v), want ≥ 30", len(files), err)
	}
	for _, f := range files {
		c := tc{name: "submit-" + filepath.Base(f), args: []string{"submit", f}, want: f + ":", many: true}
		switch filepath.Base(f) {
		case "policy_allowlist.yaml", "policy_private.yaml", "policy_private_ranges.yaml", "policy_scheme.yaml",
			"stdio_no_allowlist.yaml", "stdio_not_allowlisted.yaml":
			c.code = 3 // every problem in these files is a policy refusal
		}
		cases = append(cases, c)
	}
	concurrency0 := edited("concurrency0", "spec:\n", "spec:\n  concurrency: 0\n")
	cases = append(cases,
		tc{name: "spec-concurrency-0", args: []string{"submit", concurrency0}, want: concurrency0 + ":13:16: spec.concurrency: concurrency must be at least 1, got 0"},
		tc{name: "retry-maxAttempts-0", args: []string{"submit", withRetry("max0", "{maxAttempts: 0}")}, want: ":29:77: spec.actions.lookup.retry.maxAttempts: retry.maxAttempts must be at least 1, got 0"},
		tc{name: "retry-backoff-below-1", args: []string{"submit", withRetry("backoff", "{maxAttempts: 2, backoffFactor: 0.5}")}, want: "spec.actions.lookup.retry.backoffFactor: retry.backoffFactor must be at least 1, got 0.5"},
		tc{name: "retry-interval-negative", args: []string{"submit", withRetry("negative", "{maxAttempts: 2, initialIntervalSeconds: -1}")}, want: "spec.actions.lookup.retry.initialIntervalSeconds: retry.initialIntervalSeconds must not be negative, got -1"},
		tc{name: "retry-misspelt-key", args: []string{"submit", withRetry("misspelt", "{maxAtempts: 2}")}, want: `spec.actions.lookup.retry.maxAtempts: unknown key "maxAtempts"`},
		tc{name: "retry-not-a-mapping", args: []string{"submit", withRetry("scalar", "3")}, want: "spec.actions.lookup.retry: expected a mapping"},
		tc{name: "continueOnError-not-bool", args: []string{"submit", edited("coe", "    - id: fetch\n", "    - id: fetch\n      continueOnError: maybe\n")}, want: `:39:24: spec.tasks[1].continueOnError: expected true or false, got string "maybe"`},
		tc{name: "task-timeout-negative", args: []string{"submit", edited("timeout", "    - id: fetch\n", "    - id: fetch\n      timeoutSeconds: -5\n")}, want: ":39:23: spec.tasks[1].timeoutSeconds: timeoutSeconds must be at least 1, got -5"},
		tc{name: "submit-input-without-equals", args: []string{"submit", good, "--input", "query"}, want: `agentctl: --input "query": want key=value`},
		tc{name: "run-input-without-equals", args: []string{"run", good, "--input", "query"}, want: `agentctl: --input "query": want key=value`},
		tc{name: "submit-input-undeclared", args: []string{"submit", good, "--input", "nope=1"}, want: `input "nope" is not declared`},
		tc{name: "submit-no-file", args: []string{"submit"}, want: "arg"},
		tc{name: "submit-concurrency-flag", args: []string{"submit", good, "--concurrency", "2"}, want: "--concurrency"},
		tc{name: "run-concurrency-0", args: []string{"run", good, "--concurrency", "0"}, want: "--concurrency must be at least 1, got 0"},
		tc{name: "run-concurrency-word", args: []string{"run", good, "--concurrency", "many"}, want: `"many" for "--concurrency"`},
		tc{name: "worker-concurrency-0", args: []string{"worker", "--drain", "--concurrency", "0"}, want: "--concurrency 0"},
		tc{name: "worker-concurrency-negative", args: []string{"worker", "--drain", "--concurrency", "-1"}, want: "--concurrency -1"},
		tc{name: "worker-grace-0", args: []string{"worker", "--drain", "--grace", "0s"}, want: "--grace 0s"},
		tc{name: "worker-grace-negative", args: []string{"worker", "--drain", "--grace", "-1s"}, want: "--grace -1s"},
		tc{name: "worker-grace-word", args: []string{"worker", "--drain", "--grace", "soon"}, want: `"soon" for "--grace"`},
		tc{name: "worker-poll-0", args: []string{"worker", "--drain", "--poll", "0s"}, want: "--poll 0s"},
		tc{name: "worker-poll-negative", args: []string{"worker", "--drain", "--poll", "-1s"}, want: "--poll -1s"},
		tc{name: "worker-argument", args: []string{"worker", "extra", "--drain"}, want: `"extra"`},
	)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, stderr, code := cli(t, append(c.args, "--db", db)...)
			want := c.code
			if want == 0 {
				want = 2
			}
			if code != want {
				t.Fatalf("exit %d, want %d; stderr: %s", code, want, stderr)
			}
			if n := strings.Count(stderr, c.want); n == 0 || n > 1 && !c.many {
				t.Fatalf("message names %q %d times, want once: %s", c.want, n, stderr)
			}
			if strings.Contains(stderr, "panic") || strings.Contains(stderr, "goroutine ") {
				t.Fatalf("panic output: %s", stderr)
			}
			if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
				t.Fatal("database changed")
			}
		})
	}
	if n := runCount(t, db); n != 1 {
		t.Fatalf("runs = %d, want only the seed run", n)
	}
}
