package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/workflow/spec"
)

// lanesWorkflow is a workflow of the given tasks (each line a task's
// needs clause, "" for none written) and spec.concurrency c (0: absent).
func lanesWorkflow(t *testing.T, c int, needs ...string) *spec.Workflow {
	t.Helper()
	var b strings.Builder
	b.WriteString("apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: lanes}\nspec:\n")
	if c > 0 {
		fmt.Fprintf(&b, "  concurrency: %d\n", c)
	}
	b.WriteString("  mcpServers:\n    s: {url: \"https://mcp.example.com/mcp\"}\n  actions:\n    a: {kind: mcp.call, idempotency: pure}\n  tasks:\n")
	for i, n := range needs {
		if n != "" {
			n = ", needs: " + n
		}
		fmt.Fprintf(&b, "    - {id: t%d, uses: action:a%s, with: {server: s, tool: x}}\n", i, n)
	}
	wf, err := spec.Parse("lanes.yaml", []byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	return wf
}

func TestWorkflowLanes(t *testing.T) {
	for _, c := range []struct {
		name        string
		concurrency int
		override    int
		needs       []string
		want        int
	}{
		{"a chain (each task needs the one before)", 0, 0, []string{"", "", "", ""}, 1},
		{"one task", 8, 0, []string{""}, 1},
		{"independent tasks, default concurrency", 0, 0, []string{"[]", "[]", "[]", "[]", "[]", "[]"}, spec.DefaultConcurrency},
		{"independent tasks, fewer than the concurrency", 8, 0, []string{"[]", "[]", "[]"}, 3},
		{"independent tasks, concurrency 1", 1, 0, []string{"[]", "[]", "[]"}, 1},
		{"--concurrency overrides", 1, 2, []string{"[]", "[]", "[]"}, 2},
		{"two chains", 8, 0, []string{"[]", "[t0]", "[]", "[t2]"}, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := workflowLanes(lanesWorkflow(t, c.concurrency, c.needs...), c.override); got != c.want {
				t.Fatalf("workflowLanes = %d, want %d", got, c.want)
			}
		})
	}
}

// TestFitProcsToLanes: the process's GOMAXPROCS falls to the lanes, never
// rises, and stays as the user set it when GOMAXPROCS is in the
// environment.
func TestFitProcsToLanes(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })
	runtime.GOMAXPROCS(2)
	t.Setenv("GOMAXPROCS", "2")
	fitProcsToLanes(1)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS set by the user: fitted to %d, want 2", got)
	}
	t.Setenv("GOMAXPROCS", "")
	fitProcsToLanes(8)
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("8 lanes on 2 Ps: GOMAXPROCS %d, want 2 (never raised)", got)
	}
	fitProcsToLanes(1)
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("one lane: GOMAXPROCS %d, want 1", got)
	}
}
