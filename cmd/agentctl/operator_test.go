package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// reportTool answers with a multi-line report (newlines, a CRLF, tabs and
// an escape sequence) as structured content.
func reportTool(report string) mcptest.ToolDef {
	return mcptest.ToolDef{Name: "report",
		Handler: func(context.Context, *mcptest.Call) (*mcptest.Result, error) {
			return &mcptest.Result{Content: mcptest.Text("report"), StructuredContent: map[string]any{"report": report, "n": 2}}, nil
		}}
}

// TestCLI_MultilineOutputHuman: a multi-line output is printed on stdout
// as indented lines, each sanitised on its own (tabs kept, an escape
// neutralised), never with its newlines turned into U+FFFD; a one-line
// output stays on its name's line; json keeps the value as it is.
func TestCLI_MultilineOutputHuman(t *testing.T) {
	report := "# Research Report: raft\n\n## Research\tfindings\r\n- one\x1b[31m red\n"
	srv := mcptest.Start(t, mcptest.Options{}, reportTool(report))
	db := filepath.Join(t.TempDir(), "a.db")
	wf := testkit.Workflow{Name: "report", URL: srv.URL,
		Tasks: []testkit.Task{{ID: "write", Idempotency: "pure", Tool: "report"}},
		Outputs: []testkit.Output{{Name: "report", Value: "${{ tasks.write.output.report }}"},
			{Name: "n", Value: "${{ tasks.write.output.n }}"}}}.WriteFile(t)
	out, stderr, code := cli(t, "run", wf, "--db", db)
	if code != 0 {
		t.Fatalf("run: exit %d %s", code, stderr)
	}
	want := "n: 2\nreport:\n  # Research Report: raft\n  \n  ## Research\tfindings\n  - one\uFFFD[31m red\n"
	if out != want {
		t.Fatalf("stdout =\n%q\nwant\n%q", out, want)
	}
	out, _, code = cli(t, "run", wf, "--db", db, "--output", "json")
	if code != 0 || !strings.Contains(out, `"report": "# Research Report: raft\n\n## Research\tfindings\r\n- one\u001b[31m red\n"`) {
		t.Fatalf("json output changed the value: exit %d\n%s", code, out)
	}
}
