package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// adhoc holds the flags shared by `mcp tools` and `mcp call`.
type adhoc struct {
	headers      []string
	timeout      int
	allowPrivate bool
}

func (f *adhoc) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.headers, "header", nil, "request header as NAME=env:VAR or NAME=file:PATH (a secret reference, never a literal); repeatable")
	cmd.Flags().IntVar(&f.timeout, "timeout", 60, "inactivity timeout in seconds")
	cmd.Flags().BoolVar(&f.allowPrivate, "allow-private", false, "allow loopback and private addresses (needed for 127.0.0.1)")
}

// workflowFor writes the one-task workflow an ad-hoc command records, so that
// inspect, replay and audit work on it like on any run.
func (f *adhoc) workflowFor(rawURL, tool, idempotency string, args json.RawMessage) (*spec.Workflow, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return nil, usageErr("URL %q: want an absolute http(s) URL", rawURL)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: agentctl.dev/v1alpha1\nkind: Workflow\nmetadata:\n  name: adhoc-%s\nspec:\n", toolOrList(tool))
	fmt.Fprintf(&b, "  policy:\n    networkAllowlist: [%s]\n", quote(u.Hostname()))
	var envs, roots []string
	headers := map[string]string{}
	for _, h := range f.headers {
		name, ref, ok := strings.Cut(h, "=")
		kind, val, ok2 := strings.Cut(ref, ":")
		if !ok || !ok2 || name == "" || val == "" || (kind != "env" && kind != "file") {
			return nil, usageErr("--header %q: want NAME=env:VAR or NAME=file:PATH", h)
		}
		headers[name] = fmt.Sprintf("{%s: %s}", kind, quote(val))
		switch kind {
		case "env":
			envs = append(envs, quote(val))
		case "file":
			abs, err := filepath.Abs(val)
			if err != nil {
				return nil, usageErr("--header %q: %w", h, err)
			}
			roots = append(roots, quote(filepath.Dir(abs)))
			headers[name] = fmt.Sprintf("{file: %s}", quote(abs))
		}
	}
	if len(envs) > 0 {
		fmt.Fprintf(&b, "    environmentAllowlist: [%s]\n", strings.Join(envs, ", "))
	}
	if len(roots) > 0 {
		fmt.Fprintf(&b, "    secretFileRoots: [%s]\n", strings.Join(roots, ", "))
	}
	fmt.Fprintf(&b, "    network: {allowedSchemes: [%s], allowPrivate: %t}\n", quote(u.Scheme), f.allowPrivate)
	fmt.Fprintf(&b, "  mcpServers:\n    remote:\n      url: %s\n      timeoutSeconds: %d\n", quote(rawURL), f.timeout)
	if len(headers) > 0 {
		names := make([]string, 0, len(headers))
		for n := range headers {
			names = append(names, n)
		}
		sort.Strings(names)
		b.WriteString("      headers:\n")
		for _, n := range names {
			fmt.Fprintf(&b, "        %s: %s\n", quote(n), headers[n])
		}
	}
	if tool == "" {
		// The language needs a task; listing tools runs none of them.
		b.WriteString("  actions:\n    list: {kind: mcp.call, idempotency: pure}\n")
		b.WriteString("  tasks:\n    - id: tools\n      uses: action:list\n      with: {server: remote, tool: tools/list}\n")
	} else {
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		fmt.Fprintf(&b, "  actions:\n    call: {kind: mcp.call, idempotency: %s}\n", quote(idempotency))
		fmt.Fprintf(&b, "  tasks:\n    - id: call\n      uses: action:call\n      with:\n        server: remote\n        tool: %s\n        arguments: %s\n", quote(tool), args)
		b.WriteString("  outputs:\n    result: \"${{ tasks.call.output }}\"\n")
	}
	wf, err := spec.Parse("adhoc.yaml", []byte(b.String()))
	if err != nil {
		if !f.allowPrivate && strings.Contains(err.Error(), "allowPrivate") {
			err = fmt.Errorf("%w\n(ad hoc: pass --allow-private to allow loopback and private addresses)", err)
		}
		return nil, invalid(err)
	}
	return wf, nil
}

func toolOrList(tool string) string {
	if tool == "" {
		return "tools"
	}
	return "call"
}

// quote renders s as a YAML double-quoted (JSON) string.
func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (a *app) mcpCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Talk to one MCP server ad hoc (each call is recorded as a one-task run)",
		Example: `  agentctl mcp tools http://127.0.0.1:8765/mcp --allow-private
  agentctl mcp call http://127.0.0.1:8765/mcp echo --args '{"message":"hi"}' --allow-private`,
	}
	cmd.AddCommand(a.mcpToolsCmd(), a.mcpCallCmd())
	return cmd
}

func (a *app) mcpToolsCmd() *cobra.Command {
	var f adhoc
	cmd := &cobra.Command{
		Use:     "tools URL",
		Short:   "List a server's tools (names, schemas; annotations are untrusted hints)",
		Example: "  agentctl mcp tools http://127.0.0.1:8765/mcp --allow-private\n  agentctl mcp tools https://mcp.example.com/mcp --header authorization=env:MCP_TOKEN --output json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wf, err := f.workflowFor(args[0], "", "", nil)
			if err != nil {
				return err
			}
			return a.withDB(cmd.Context(), func(db *events.DB) error {
				r := a.runner(db)
				res, cat, err := r.ListTools(cmd.Context(), wf, "remote")
				if err != nil {
					return err
				}
				if res.Err != nil {
					return &exitError{code: res.ExitCode, runID: res.RunID, err: res.Err}
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "ToolList", true, map[string]any{"runId": res.RunID, "tools": viewTools(cat.Tools), "warnings": append([]string{}, cat.Warnings...)})
				}
				tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tTITLE\tINPUT\tOUTPUT\tHINTS (untrusted)\tDESCRIPTION")
				for _, t := range cat.Tools {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(t.Name), truncate(clean(t.Title), 24), schemaSummary(t.InputSchema), schemaSummary(t.OutputSchema), hints(t.Annotations), truncate(clean(t.Description), 60))
				}
				_ = tw.Flush()
				for _, w := range cat.Warnings {
					fmt.Fprintf(a.stderr, "warning: %s\n", clean(w))
				}
				fmt.Fprintf(a.stderr, "run %s (%d tools)\n", res.RunID, len(cat.Tools))
				return nil
			})
		},
	}
	f.register(cmd)
	return cmd
}

func (a *app) mcpCallCmd() *cobra.Command {
	var f adhoc
	var argsFlag, idem string
	cmd := &cobra.Command{
		Use:   "call URL TOOL",
		Short: "Call one tool, recorded as a one-task run (inspect, replay and audit work on it)",
		Example: `  agentctl mcp call http://127.0.0.1:8765/mcp search --args '{"q":"mcp"}' --idempotency pure --allow-private
  agentctl mcp call https://mcp.example.com/mcp create --args @args.json --idempotency keyed --header authorization=env:MCP_TOKEN`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			raw := []byte(argsFlag)
			if strings.HasPrefix(argsFlag, "@") {
				b, err := os.ReadFile(argsFlag[1:])
				if err != nil {
					return usageErr("--args %s: %w", argsFlag, err)
				}
				raw = b
			}
			var obj map[string]any
			if err := json.Unmarshal(raw, &obj); err != nil {
				return usageErr("--args: want a JSON object: %w", err)
			}
			compact, _ := json.Marshal(obj)
			wf, err := f.workflowFor(args[0], args[1], idem, compact)
			if err != nil {
				return err
			}
			return a.execRun(cmd.Context(), wf, map[string]any{}, workflow.RunOptions{Mode: "adhoc", Command: "mcp call"})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&argsFlag, "args", "{}", "tool arguments as a JSON object, or @FILE")
	cmd.Flags().StringVar(&idem, "idempotency", "unknown", "pure, idempotent, keyed, at_most_once or unknown")
	return cmd
}

func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// schemaSummary lists an object schema's properties, required ones marked with *.
func schemaSummary(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "-"
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return "?"
	}
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	names := make([]string, 0, len(s.Properties))
	for n := range s.Properties {
		if req[n] {
			n += "*"
		}
		names = append(names, clean(n))
	}
	sort.Strings(names)
	return truncate("{"+strings.Join(names, ",")+"}", 40)
}

// hints lists the true boolean annotations (readOnlyHint, ...): untrusted.
func hints(raw json.RawMessage) string {
	var m map[string]any
	if json.Unmarshal(raw, &m) != nil || len(m) == 0 {
		return "-"
	}
	var out []string
	for k, v := range m {
		if b, ok := v.(bool); ok && b {
			out = append(out, strings.TrimSuffix(k, "Hint"))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "-"
	}
	return clean(strings.Join(out, ","))
}
