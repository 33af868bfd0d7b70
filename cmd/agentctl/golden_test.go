package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/* from the commands' output")

// dataKeys hold data, not the CLI's vocabulary (a tool's schema, a
// protocol payload, a workflow's outputs): their keys are not checked.
var dataKeys = map[string]bool{"payload": true, "outputs": true, "inputSchema": true, "outputSchema": true, "annotations": true,
	"execution": true, "serverInfo": true, "protocolState": true, "result": true}

var camel = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

// checkKeys fails on any key outside dataKeys' subtrees that is not camelCase.
func checkKeys(t *testing.T, name, path string, v any) {
	t.Helper()
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if !camel.MatchString(k) {
				t.Errorf("%s: key %s.%s is not camelCase", name, path, k)
			}
			if !dataKeys[k] {
				checkKeys(t, name, path+"."+k, c)
			}
		}
	case []any:
		for i, c := range x {
			checkKeys(t, name, fmt.Sprintf("%s[%d]", path, i), c)
		}
	}
}

// normalizer replaces what differs between two runs of a test (ids,
// hashes, times, ports, temporary paths, versions) by stable names, the
// same value by the same name within one output.
type normalizer struct {
	seen map[string]string
	n    map[string]int
	tmp  []string
}

var volatile = []struct {
	re   *regexp.Regexp
	kind string
}{
	{regexp.MustCompile(`(run|replay)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "ID"},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "UUID"},
	{regexp.MustCompile(`[0-9a-f]{64}`), "HEX"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "TIME"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "ADDR"},
}

func (n *normalizer) str(s string) string {
	for _, d := range n.tmp {
		s = strings.ReplaceAll(s, d, "TMP")
	}
	for _, v := range volatile {
		s = v.re.ReplaceAllStringFunc(s, func(m string) string {
			if v.kind == "TIME" {
				return "TIME"
			}
			if v.kind == "ID" {
				kind, _, _ := strings.Cut(m, "-")
				return n.name(m, strings.ToUpper(kind))
			}
			return n.name(m, v.kind)
		})
	}
	return s
}

func (n *normalizer) name(v, kind string) string {
	if s, ok := n.seen[v]; ok {
		return s
	}
	n.n[kind]++
	s := fmt.Sprintf("<%s%d>", kind, n.n[kind])
	n.seen[v] = s
	return s
}

func (n *normalizer) walk(key string, v any) any {
	switch x := v.(type) {
	case string:
		if key == "go" || key == "commit" || key == "progressToken" || key == "shortId" || key == "version" && strings.Contains(x, ".") {
			return "<" + strings.ToUpper(key) + ">"
		}
		return n.str(x)
	case float64:
		if strings.HasSuffix(key, "Ms") {
			return 0
		}
	case map[string]any: // in key order: names are given in order of appearance
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			x[k] = n.walk(k, x[k])
		}
	case []any:
		for i, c := range x {
			x[i] = n.walk(key, c)
		}
	}
	return v
}

// golden normalises the JSON documents in out (one, or a stream of them),
// checks their keys and compares them with testdata/golden/name.
func golden(t *testing.T, name, out string, tmp ...string) {
	t.Helper()
	n := &normalizer{seen: map[string]string{}, n: map[string]int{}, tmp: tmp}
	dec := json.NewDecoder(strings.NewReader(out))
	var b bytes.Buffer
	docs := 0
	for {
		var v any
		if err := dec.Decode(&v); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%s: not JSON: %v\n%s", name, err, out)
		}
		docs++
		checkKeys(t, name, "", v)
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(n.walk("", v)); err != nil {
			t.Fatal(err)
		}
	}
	if docs == 0 {
		t.Fatalf("%s: no JSON output", name)
	}
	path := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -run TestCLI_JSONGolden -update)", err)
	}
	if !bytes.Equal(want, b.Bytes()) {
		t.Errorf("%s differs from the golden file (go test -run TestCLI_JSONGolden -update rewrites it):\n%s", name, b.String())
	}
}

// TestCLI_JSONGolden: every command's --output json (and jsonl) answer,
// normalised, equals its golden file, and every key of the CLI's own
// vocabulary is camelCase.
func TestCLI_JSONGolden(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, actTool())
	dir := t.TempDir()
	db := filepath.Join(dir, "a.db")
	wf := actWorkflow(t, srv.URL, "idempotent")
	tmp := []string{dir, filepath.Dir(wf)}
	js := func(name string, wantCode int, args ...string) (string, string) {
		t.Helper()
		out, stderr, code := cli(t, append(args, "--db", db, "--output", "json")...)
		if code != wantCode {
			t.Fatalf("%v: exit %d, want %d: %s", args, code, wantCode, stderr)
		}
		if name != "" {
			golden(t, name, out, tmp...)
		}
		return out, stderr
	}
	out, _ := js("run.json", 0, "run", wf)
	runID := jsonRunID(t, out)
	js("inspect.json", 0, "inspect", runID)
	js("effects-list.json", 0, "effects", "list", runID)
	js("replay.json", 0, "replay", runID)
	js("audit-verify.json", 0, "audit", "verify", auditFile(t, db, runID))
	js("db-rebuild-projections.json", 0, "db", "rebuild-projections", runID)
	js("db-encryption-status.json", 0, "db", "encryption", "status")
	js("version.json", 0, "version")
	js("check.json", 0, "check", wf)
	bad := writeFile(t, "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata: {name: x}\nspec:\n  bogus: 1\n  tasks: []\n")
	tmp = append(tmp, filepath.Dir(bad))
	js("check-problems.json", 2, "check", bad)
	js("mcp-tools.json", 0, "mcp", "tools", srv.URL, "--allow-private")
	js("mcp-call.json", 0, "mcp", "call", srv.URL, "act", "--args", `{"n":2}`, "--allow-private")
	_, stderr := js("", 2, "inspect", "run-nope")
	golden(t, "error-unknown-run.json", stderr, tmp...)

	// An uncertain run, reconciled and resumed.
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Status: http.StatusNotFound, Nth: 1})
	out, stderr = js("run-uncertain.json", 3, "run", actWorkflow(t, srv.URL, "unknown"))
	golden(t, "error-uncertain.json", stderr, tmp...)
	uncertainID := jsonRunID(t, out)
	effects := listEffects(t, db, uncertainID)
	js("effects-reconcile.json", 0, "effects", "reconcile", effects[0]["effectId"].(string), "--status", "not-applied", "--reason", "checked")
	js("resume.json", 0, "resume", uncertainID)
	js("runs-list.json", 0, "runs", "list")
	js("runs-prune.json", 0, "runs", "prune", "--keep", "1", "--dry-run")
	js("submit.json", 0, "submit", wf)

	out, stderr, code := cli(t, "run", wf, "--db", db, "--output", "jsonl")
	if code != 0 {
		t.Fatalf("jsonl run: exit %d %s", code, stderr)
	}
	golden(t, "run.jsonl", out, tmp...)
	// run --inputs: one RunsResult envelope, the runs in input order (a
	// failed one among them); with jsonl, a RunEnded object per run. In a
	// database of its own, one run at a time: the order is the input's.
	manyDB := filepath.Join(dir, "many.db")
	qt := &qTool{}
	manyWF := inputsWorkflow(t, mcptest.Start(t, mcptest.Options{}, qt.failOn("bad")).URL)
	tmp = append(tmp, filepath.Dir(manyWF))
	lines := writeLines(t, `{"q": "a"}`, ``, `{"q": "bad"}`, `{"q": "c"}`)
	tmp = append(tmp, filepath.Dir(lines))
	for _, c := range []struct{ name, output string }{{"run-inputs.json", "json"}, {"run-inputs.jsonl", "jsonl"}} {
		out, stderr, code = cli(t, "run", manyWF, "--inputs", lines, "--db", manyDB, "--output", c.output)
		if code != 4 {
			t.Fatalf("run --inputs: exit %d, want 4: %s", code, stderr)
		}
		golden(t, c.name, out, tmp...)
	}
	// check --remote records runs, last and in a database of its own: the
	// other files' runs (and the server's event ids) stay as they are.
	checkDB := filepath.Join(dir, "check.db")
	findingsWF := writeCheckWorkflow(t, srv.URL, "", `  actions:
    a: {kind: mcp.call, idempotency: pure}
  tasks:
    - id: only
      uses: action:a
      with: {server: local, tool: akt, arguments: {n: 1}}
    - id: next
      uses: action:a
      with: {server: local, tool: act, arguments: {n: "${{ tasks.only.output.dne }}"}}
  outputs:
    done: "${{ tasks.next.output.don }}"
`)
	tmp = append(tmp, filepath.Dir(findingsWF))
	for _, c := range []struct {
		name, file string
		code       int
	}{{"check-remote.json", wf, 0}, {"check-remote-findings.json", findingsWF, 2}} {
		out, stderr, code = cli(t, "check", "--remote", c.file, "--db", checkDB, "--output", "json")
		if code != c.code {
			t.Fatalf("check --remote %s: exit %d, want %d: %s", c.file, code, c.code, stderr)
		}
		golden(t, c.name, out, tmp...)
	}
}

// auditFile exports runID to a file and returns its path.
func auditFile(t *testing.T, db, runID string) string {
	t.Helper()
	p := filepath.Join(filepath.Dir(db), "run.audit.jsonl")
	if _, stderr, code := cli(t, "audit", "export", runID, "-o", p, "--db", db); code != 0 {
		t.Fatalf("audit export: %s", stderr)
	}
	return p
}
