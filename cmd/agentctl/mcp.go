package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// adhoc holds the flags shared by `mcp tools` and `mcp call`.
type adhoc struct {
	headers      []string
	timeout      time.Duration
	allowPrivate bool
	protocol     string
	oauth        oauthFlags
}

func (f *adhoc) register(cmd *cobra.Command) {
	cmd.Flags().StringArrayVar(&f.headers, "header", nil, "request header as NAME=env:VAR, NAME=file:PATH or NAME=VALUE (a literal: visible in the process list, redacted in the log; at least 8 bytes); repeatable")
	durationVar(cmd, false, &f.timeout, "timeout", 60*time.Second, "inactivity timeout, restarted by every frame; whole seconds, at least 1")
	cmd.Flags().BoolVar(&f.allowPrivate, "allow-private", false, "allow loopback and private addresses (needed for 127.0.0.1)")
	cmd.Flags().StringVar(&f.protocol, "protocol", "", "MCP revision to speak: 2025-11-25 (default), 2026-07-28 (stateless), or auto (server/discover, falling back to initialize)")
	f.oauth.register(cmd)
}

// literalHeaderEnv is the environment variable prefix a literal --header
// value is handed to the transport through: the recorded workflow names
// the variable (a secret reference like any other), never the value.
const literalHeaderEnv = "AGENTCTL_ADHOC_HEADER_"

// minLiteralSecret is the shortest literal --header value (and token of a
// "Bearer xyz" value) accepted: a shorter one would be redacted wherever
// its bytes occur in frames, hiding innocent text.
const minLiteralSecret = 8

// headerRef turns one --header NAME=env:VAR|file:PATH|VALUE into a secret
// reference. A literal VALUE is put in this process's environment under a
// fresh name (redacted like any secret) and a warning says that it is
// visible in the process list.
func (f *adhoc) headerRef(stderr io.Writer, h string, n int) (string, spec.SecretRefSpec, error) {
	name, val, ok := strings.Cut(h, "=")
	if !ok || name == "" || val == "" {
		return "", spec.SecretRefSpec{}, usageErr("--header %s: want NAME=env:VAR, NAME=file:PATH or NAME=VALUE", strconv.Quote(name))
	}
	kind, ref, _ := strings.Cut(val, ":")
	switch {
	case kind == "env" && ref != "":
		return name, spec.SecretRefSpec{Env: ref}, nil
	case kind == "file" && ref != "":
		abs, err := filepath.Abs(ref)
		if err != nil {
			return "", spec.SecretRefSpec{}, usageErr("--header %s: %w", strconv.Quote(name), err)
		}
		return name, spec.SecretRefSpec{File: abs}, nil
	}
	fields := strings.Fields(val)
	if len(val) < minLiteralSecret || len(fields) == 0 || len(fields[len(fields)-1]) < minLiteralSecret {
		return "", spec.SecretRefSpec{}, usageErr("--header %s: a literal value (or its token) shorter than %d bytes is refused, as it would be redacted wherever those bytes occur; use NAME=env:VAR or NAME=file:PATH",
			strconv.Quote(name), minLiteralSecret)
	}
	env := fmt.Sprintf("%s%d", literalHeaderEnv, n)
	if err := os.Setenv(env, val); err != nil {
		return "", spec.SecretRefSpec{}, usageErr("--header %s: %w", strconv.Quote(name), err)
	}
	fmt.Fprintf(stderr, "warning: --header %s: a literal value is visible in the process list (ps); it is redacted in the log. Prefer %s=env:VAR or %s=file:PATH\n",
		clean(name), clean(name), clean(name))
	return name, spec.SecretRefSpec{Env: env}, nil
}

// workflowFor builds the one-task workflow an ad-hoc command records, so
// that inspect, replay, resume and audit work on it like on any run. It is
// built as a value: the tool's arguments are data (a "${{" in them is sent
// as is), never template or YAML source.
// target is what an ad-hoc command talks to: a URL, or the command of a
// stdio server (after --).
type target struct {
	url     string
	command []string
}

// splitDash splits a command's arguments at "--": before it (want of them
// when a stdio command follows), and the command [PROGRAM, ARG...]; or, with
// no "--", the URL first and want more.
func splitDash(cmd *cobra.Command, args []string, want int) ([]string, target, error) {
	at := cmd.ArgsLenAtDash()
	if at < 0 {
		if len(args) != want+1 {
			return nil, target{}, usageErr("want %s (or a stdio server after --: %s -- PROGRAM ARG...)", cmd.Use, strings.Replace(cmd.Use, "URL ", "", 1))
		}
		return args[1:], target{url: args[0]}, nil
	}
	if at != want || len(args) == at {
		return nil, target{}, usageErr("want %s -- PROGRAM ARG... (%d argument(s) before --, a program after it)", strings.Replace(cmd.Use, "URL ", "", 1), want)
	}
	return args[:at], target{command: args[at:]}, nil
}

// workflowForTarget is workflowFor for a URL or a stdio command. A command
// typed on the command line is allowed by being typed: it is its own
// commandAllowlist.
func (f *adhoc) workflowForTarget(stderr io.Writer, to target, tool, idempotency string, args map[string]any) (*spec.Workflow, error) {
	w := spec.Workflow{APIVersion: spec.APIVersion, Kind: "Workflow", Metadata: spec.Metadata{Name: "adhoc-" + toolOrList(tool)}}
	if f.timeout < time.Second {
		return nil, usageErr("--timeout %s: want at least 1s", f.timeout)
	}
	secs := int((f.timeout + time.Second - 1) / time.Second) // whole seconds, rounded up
	server := spec.ServerSpec{URL: to.url, TimeoutSeconds: secs, ProtocolVersion: f.protocol}
	if len(to.command) > 0 {
		if len(f.headers) > 0 || f.allowPrivate {
			return nil, usageErr("--header and --allow-private apply to a URL, not to a stdio server")
		}
		server = spec.ServerSpec{Command: to.command, TimeoutSeconds: secs, ProtocolVersion: f.protocol}
		w.Spec.Policy = spec.PolicySpec{CommandAllowlist: []string{to.command[0]}}
	} else {
		u, err := url.Parse(to.url)
		if err != nil || u.Host == "" {
			return nil, usageErr("URL %q: want an absolute http(s) URL", to.url)
		}
		w.Spec.Policy = spec.PolicySpec{NetworkAllowlist: []string{u.Hostname()},
			Network: spec.NetworkSpec{AllowedSchemes: []string{u.Scheme}, AllowPrivate: f.allowPrivate}}
	}
	for i, h := range f.headers {
		name, ref, err := f.headerRef(stderr, h, i+1)
		if err != nil {
			return nil, err
		}
		if server.Headers == nil {
			server.Headers = map[string]spec.SecretRefSpec{}
		}
		server.Headers[name] = ref
		switch {
		case ref.Env != "" && !slices.Contains(w.Spec.Policy.EnvironmentAllowlist, ref.Env):
			w.Spec.Policy.EnvironmentAllowlist = append(w.Spec.Policy.EnvironmentAllowlist, ref.Env)
		case ref.File != "" && !slices.Contains(w.Spec.Policy.SecretFileRoots, filepath.Dir(ref.File)):
			w.Spec.Policy.SecretFileRoots = append(w.Spec.Policy.SecretFileRoots, filepath.Dir(ref.File))
		}
	}
	w.Spec.MCPServers = map[string]spec.ServerSpec{"remote": server}
	if tool == "" {
		// The language needs a task; listing tools runs none of them.
		w.Spec.Actions = map[string]spec.ActionSpec{"list": {Kind: "mcp.call", Idempotency: "pure"}}
		w.Spec.Tasks = []spec.TaskSpec{{ID: "tools", Uses: "action:list", With: spec.TaskWith{Server: "remote", Tool: "tools/list"}}}
	} else {
		w.Spec.Actions = map[string]spec.ActionSpec{"call": {Kind: "mcp.call", Idempotency: idempotency}}
		lit, _ := spec.Literal(args).(map[string]any)
		w.Spec.Tasks = []spec.TaskSpec{{ID: "call", Uses: "action:call", With: spec.TaskWith{Server: "remote", Tool: tool, Arguments: lit}}}
		w.Spec.Outputs = map[string]any{"result": "${{ tasks.call.output }}"}
	}
	wf, err := spec.Build("adhoc.json", w)
	if err != nil {
		return nil, invalid(adhocErr(err, to))
	}
	return wf, nil
}

func toolOrList(tool string) string {
	if tool == "" {
		return "tools"
	}
	return "call"
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
		Example: "  agentctl mcp tools http://127.0.0.1:8765/mcp --allow-private\n  agentctl mcp tools https://mcp.example.com/mcp --header authorization=env:MCP_TOKEN --output json\n  agentctl mcp tools -- npx -y @modelcontextprotocol/server-filesystem ./data",
		Args:    cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, to, err := splitDash(cmd, args, 0)
			if err != nil {
				return err
			}
			wf, err := f.workflowForTarget(a.stderr, to, "", "", nil)
			if err != nil {
				return err
			}
			if err := a.withOAuth(&f.oauth, to, f.allowPrivate); err != nil {
				return err
			}
			if err := requireSecrets(wf); err != nil {
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
				fmt.Fprintln(tw, "NAME\tTITLE\tINPUT\tOUTPUT\tTASKS\tHINTS (untrusted)\tDESCRIPTION")
				for _, t := range cat.Tools {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", clean(t.Name), truncate(clean(t.Title), 24), schemaSummary(t.InputSchema), schemaSummary(t.OutputSchema), taskSupport(t.Execution), hints(t.Annotations), truncate(clean(t.Description), 60))
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
	var argsFlag, idem, elicitMode, elicitValues string
	cmd := &cobra.Command{
		Use:   "call URL TOOL",
		Short: "Call one tool, recorded as a one-task run (inspect, replay and audit work on it)",
		Example: `  agentctl mcp call http://127.0.0.1:8765/mcp search --args '{"q":"mcp"}' --idempotency pure --allow-private
  agentctl mcp call https://mcp.example.com/mcp create --args @args.json --idempotency keyed --header authorization=env:MCP_TOKEN
  agentctl mcp call http://127.0.0.1:8765/mcp signup --elicitation values --elicitation-values '{"name":"Ada"}' --allow-private
  agentctl mcp call read_text_file --args '{"path":"data/a.txt"}' -- npx -y @modelcontextprotocol/server-filesystem ./data`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			rest, to, err := splitDash(cmd, args, 1)
			if err != nil {
				return err
			}
			raw := []byte(argsFlag)
			if strings.HasPrefix(argsFlag, "@") {
				b, err := os.ReadFile(argsFlag[1:])
				if err != nil {
					return usageErr("--args %s: %w", argsFlag, err)
				}
				raw = b
			}
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.UseNumber() // numbers as sent, not rounded through float64
			var obj map[string]any
			if err := dec.Decode(&obj); err != nil || obj == nil || dec.More() {
				if err == nil {
					err = fmt.Errorf("not one JSON object")
				}
				return usageErr("--args: want a JSON object: %w", err)
			}
			elicit, err := elicitationFlags(elicitMode, elicitValues)
			if err != nil {
				return err
			}
			wf, err := f.workflowForTarget(a.stderr, to, rest[0], idem, obj)
			if err != nil {
				return err
			}
			if err := a.withOAuth(&f.oauth, to, f.allowPrivate); err != nil {
				return err
			}
			if elicit != nil {
				act := wf.Spec.Actions["call"]
				act.Elicitation = elicit
				wf.Spec.Actions["call"] = act
			}
			return a.execRun(cmd.Context(), wf, map[string]any{}, workflow.RunOptions{Mode: "adhoc", Command: "mcp call"})
		},
	}
	f.register(cmd)
	cmd.Flags().StringVar(&argsFlag, "args", "{}", "tool arguments as a JSON object, or @FILE")
	cmd.Flags().StringVar(&idem, "idempotency", "unknown", "pure, idempotent, keyed, at_most_once or unknown")
	cmd.Flags().StringVar(&elicitMode, "elicitation", "", "answer the server's elicitation requests: decline, defaults (the requested schema's defaults) or values (--elicitation-values over the defaults); unset declares no elicitation capability")
	cmd.Flags().StringVar(&elicitValues, "elicitation-values", "", "answers by field name as a JSON object, for --elicitation values")
	return cmd
}

// elicitationFlags turns --elicitation and --elicitation-values into an
// action's elicitation answers (nil when neither is given).
func elicitationFlags(mode, values string) (*spec.ElicitationSpec, error) {
	if mode == "" && values == "" {
		return nil, nil
	}
	switch mode {
	case "decline", "defaults", "values":
	case "":
		return nil, usageErr("--elicitation-values needs --elicitation values")
	default:
		return nil, usageErr("--elicitation %q: want decline, defaults or values", mode)
	}
	e := &spec.ElicitationSpec{Mode: mode}
	if values == "" {
		return e, nil
	}
	if mode != "values" {
		return nil, usageErr("--elicitation-values needs --elicitation values (not %s)", mode)
	}
	if err := json.Unmarshal([]byte(values), &e.Values); err != nil || e.Values == nil {
		if err == nil {
			err = fmt.Errorf("not a JSON object")
		}
		return nil, usageErr("--elicitation-values: want a JSON object: %w", err)
	}
	for k, v := range e.Values {
		switch v.(type) {
		case string, float64, bool:
		default:
			return nil, usageErr("--elicitation-values: %q: an answer is a string, number or boolean", k)
		}
	}
	return e, nil
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
