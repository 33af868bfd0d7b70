package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Workflow is a test workflow: tasks that call tools on one remote on
// loopback, each through a declared mcp.call action. YAML renders it, so a
// test states only what differs (tools, classes, arguments) and every test
// shares one correct header (the policy that admits http on 127.0.0.1).
type Workflow struct {
	Name           string // metadata.name; "" = "test"
	Server         string // the remote's name; "" = "local"
	URL            string // the remote's URL, on 127.0.0.1
	TimeoutSeconds int    // the remote's inactivity timeout; 0 = 30
	Concurrency    int    // spec.concurrency; 0 = absent
	Tasks          []Task
	Outputs        []Output

	// Command makes the remote a stdio server instead of URL; its program
	// is the policy's commandAllowlist.
	Command []string
	// ServerKeys are more keys of the remote, e.g. "env: {A: b}".
	ServerKeys []string
	// PolicyKeys are more keys of the policy, e.g. "environmentAllowlist: [A]".
	PolicyKeys []string
}

// Task is one task: it calls Tool on the remote through Action.
type Task struct {
	ID          string
	Action      string // the action's name; "" = "act_" + ID
	Idempotency string // the action's class; tasks that share an action must agree
	Tool        string
	Arguments   string   // a YAML flow mapping, e.g. "{n: 1}"; "" = none
	Retry       string   // the action's retry policy, a YAML flow mapping; "" = none
	Keys        []string // more keys of the task, e.g. "needs: []", "continueOnError: true"
}

// Output is one workflow output: Value is usually a template.
type Output struct{ Name, Value string }

// YAML is the workflow file. It panics on tasks that declare one action
// with two classes: that is a bug in the test.
func (w Workflow) YAML() string {
	name, server, timeout := w.Name, w.Server, w.TimeoutSeconds
	if name == "" {
		name = "test"
	}
	if server == "" {
		server = "local"
	}
	if timeout == 0 {
		timeout = 30
	}
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: agentctl.dev/v1alpha1
kind: Workflow
metadata: {name: %s}
spec:
`, name)
	if w.Concurrency > 0 {
		fmt.Fprintf(&b, "  concurrency: %d\n", w.Concurrency)
	}
	b.WriteString(`  policy:
    networkAllowlist: [127.0.0.1]
    network: {allowedSchemes: [http], allowPrivate: true}
`)
	remote := fmt.Sprintf("url: %q", w.URL)
	if len(w.Command) > 0 {
		fmt.Fprintf(&b, "    commandAllowlist: [%q]\n", w.Command[0])
		remote = "command: " + flowList(w.Command)
	}
	for _, k := range w.PolicyKeys {
		fmt.Fprintf(&b, "    %s\n", k)
	}
	keys := ""
	for _, k := range w.ServerKeys {
		keys += ", " + k
	}
	fmt.Fprintf(&b, `  mcpServers:
    %s: {%s, timeoutSeconds: %d%s}
  actions:
`, server, remote, timeout, keys)
	declared := map[string]string{}
	for _, t := range w.Tasks {
		action := t.action()
		if idem, ok := declared[action]; ok {
			if idem != t.Idempotency {
				panic(fmt.Sprintf("testkit: action %s declared %s and %s", action, idem, t.Idempotency))
			}
			continue
		}
		declared[action] = t.Idempotency
		retry := ""
		if t.Retry != "" {
			retry = ", retry: " + t.Retry
		}
		fmt.Fprintf(&b, "    %s: {kind: mcp.call, idempotency: %s%s}\n", action, t.Idempotency, retry)
	}
	b.WriteString("  tasks:\n")
	for _, t := range w.Tasks {
		args := ""
		if t.Arguments != "" {
			args = ", arguments: " + t.Arguments
		}
		fmt.Fprintf(&b, "    - id: %s\n      uses: action:%s\n      with: {server: %s, tool: %q%s}\n", t.ID, t.action(), server, t.Tool, args)
		for _, k := range t.Keys {
			fmt.Fprintf(&b, "      %s\n", k)
		}
	}
	if len(w.Outputs) > 0 {
		b.WriteString("  outputs:\n")
		for _, o := range w.Outputs {
			fmt.Fprintf(&b, "    %s: %q\n", o.Name, o.Value)
		}
	}
	return b.String()
}

// flowList is a YAML flow sequence of quoted strings.
func flowList(items []string) string {
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func (t Task) action() string {
	if t.Action == "" {
		return "act_" + t.ID
	}
	return t.Action
}

// WriteFile writes the workflow to a file in tb.TempDir() and returns its path.
func (w Workflow) WriteFile(tb testing.TB) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "workflow.yaml")
	if err := os.WriteFile(path, []byte(w.YAML()), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// TaskOutputs names one output after each task, holding its output.
func TaskOutputs(tasks []Task) []Output {
	out := make([]Output, len(tasks))
	for i, t := range tasks {
		out[i] = Output{Name: t.ID, Value: "${{ tasks." + t.ID + ".output }}"}
	}
	return out
}
