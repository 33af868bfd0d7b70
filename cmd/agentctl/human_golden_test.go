package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/transport/mcptest"
)

// humanVolatile are what differs between two runs of a test in human
// output beyond normalizer's ids and times: wall-clock times, durations
// and offsets, short run ids and call id prefixes.
var humanVolatile = []struct {
	re   *regexp.Regexp
	kind string
}{
	{regexp.MustCompile(`\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} UTC`), "TIME"},
	{regexp.MustCompile(`\b(\d+h)?(\d+m)?\d+(\.\d+)?(ns|µs|ms|s|m|h)\b`), "D"},
	{regexp.MustCompile(`\b[0-9a-f]{12}\b`), "CALL"},
	{regexp.MustCompile(`\b[0-9a-f]{8,11}\b`), "SHORT"},
}

var spaces = regexp.MustCompile(`  +`)

// goldenText normalises a human output and compares it with
// testdata/golden/name (-update rewrites it).
func goldenText(t *testing.T, name, out string) {
	t.Helper()
	n := &normalizer{seen: map[string]string{}, n: map[string]int{}}
	s := n.str(out)
	for _, v := range humanVolatile {
		s = v.re.ReplaceAllStringFunc(s, func(m string) string {
			if v.kind == "TIME" || v.kind == "D" {
				return "<" + v.kind + ">"
			}
			return n.name(m, v.kind)
		})
	}
	// Column widths follow the durations' widths: compare the words, and
	// leave alignment to TestCLI_HumanTables.
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		body := strings.TrimLeft(l, " ")
		lines[i] = l[:len(l)-len(body)] + spaces.ReplaceAllString(strings.TrimRight(body, " "), "  ")
	}
	s = strings.Join(lines, "\n")
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -run TestCLI_HumanGolden -update writes it)", err)
	}
	if string(want) != s {
		t.Errorf("%s differs from the golden file (go test -run TestCLI_HumanGolden -update rewrites it):\n%s", name, s)
	}
}

// TestCLI_HumanGolden: human inspect and inspect --follow of a run with
// progress, a server request, a retried task and a multi-line output equal
// their golden files. Inspect shows the outputs, durations and times
// relative to the start, one row per session, responses as "response",
// the chain verified without --verify; follow shows what run shows
// (tasks, each call's from → to with its reason, progress, the retry),
// then the summary, the outputs and the run's end.
func TestCLI_HumanGolden(t *testing.T) {
	var failed atomic.Bool
	flaky := actTool()
	flaky.Name = "flaky"
	inner := flaky.Handler
	flaky.Handler = func(ctx context.Context, c *mcptest.Call) (*mcptest.Result, error) {
		if failed.CompareAndSwap(false, true) {
			return &mcptest.Result{Content: mcptest.Text("not yet"), IsError: true}, nil
		}
		return inner(ctx, c)
	}
	srv := mcptest.Start(t, mcptest.Options{}, chattyTool(), flaky, reportTool("# Report\n\n- one\tdone"))
	db := filepath.Join(t.TempDir(), "a.db")
	wf := testkit.Workflow{Name: "golden", URL: srv.URL, Tasks: []testkit.Task{
		{ID: "chat", Idempotency: "idempotent", Tool: "act", Arguments: "{n: 1}"},
		{ID: "flaky", Idempotency: "idempotent", Tool: "flaky", Retry: "{maxAttempts: 2, initialIntervalSeconds: 0.001}"},
		{ID: "write", Idempotency: "pure", Tool: "report"},
	}, Outputs: []testkit.Output{{Name: "report", Value: "${{ tasks.write.output.report }}"}, {Name: "done", Value: "${{ tasks.flaky.output.done }}"}}}.WriteFile(t)
	if _, stderr, code := cli(t, "run", wf, "--db", db); code != 0 {
		t.Fatalf("run: exit %d %s", code, stderr)
	}
	out, stderr, code := cli(t, "inspect", "last", "--db", db)
	if code != 0 {
		t.Fatalf("inspect: exit %d %s", code, stderr)
	}
	goldenText(t, "inspect-human.txt", out)
	out, stderr, code = cli(t, "inspect", "last", "--follow", "--db", db)
	if code != 0 {
		t.Fatalf("inspect --follow: exit %d %s", code, stderr)
	}
	if strings.Contains(out, "call.transition") || regexp.MustCompile(`(?m)^#\d+ `).MatchString(out) {
		t.Errorf("follow prints raw events:\n%s", out)
	}
	goldenText(t, "follow-human.txt", out)
}
