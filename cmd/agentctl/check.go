package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

func (a *app) checkCmd() *cobra.Command {
	var remote bool
	cmd := &cobra.Command{
		Use:   "check FILE",
		Short: "Check a workflow file: syntax, references, templates, needs cycles and network policy (--remote: against its servers)",
		Long: `check parses a workflow file, resolves every reference (servers, actions, tasks, needs,
template paths) and checks every server URL against the policy. It reports every problem at
once as file:line:col: field: message and exits 2 if there is any (3 when every problem is a
policy refusal, as for run and mcp). run performs the same check before it records anything.
Warnings (file:line:col: warning: field: message; "warnings" in JSON) do not fail the check: a
retry on an at_most_once or unknown action is one, since it covers only failures that prove
nothing was sent; a secret whose environment variable is empty or unset here is another (run
would refuse to start: exit 2).

With --remote, check also connects to each server the tasks use, under the file's own policy,
and lists its tools (recorded as a run of mode check: agentctl inspect RUN shows it). It reports
each finding as file:line:col: kind: message, with kind one of unknown_tool, invalid_arguments,
output_path, task_support, unset_secret, and exits 2 on any finding; a server that cannot be
reached ends it as it would end a run (exit 3 policy, 6 remote). No tool is called.`,
		Example: "  agentctl check examples/lookup.yaml\n  agentctl check wf.yaml --output json\n  agentctl check --remote examples/lookup.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			wf, err := spec.Load(args[0])
			if err != nil {
				var ds spec.Diagnostics
				if a.output != "human" && errors.As(err, &ds) {
					_ = a.printJSON(a.stdout, "CheckResult", false, map[string]any{"file": args[0], "problems": viewDiagnostics(ds)})
				}
				return invalid(err)
			}
			ws := wf.Warnings()
			if !remote { // --remote reports them as unset_secret findings
				// The file is valid, but run would refuse it here (exit 2).
				ws = append(ws, wf.UnsetSecrets(os.Getenv)...)
			}
			warnings := viewDiagnostics(ws)
			if a.output == "human" {
				for _, w := range ws {
					fmt.Fprintf(a.stdout, "%s:%d:%d: warning: %s: %s\n", clean(w.File), w.Line, w.Col, w.Field, clean(w.Message))
				}
			}
			if remote {
				return a.checkRemote(cmd, wf, warnings)
			}
			data := map[string]any{"file": args[0], "workflow": wf.Metadata.Name, "digest": wf.Digest, "tasks": len(wf.Spec.Tasks),
				"problems": []diagnosticView{}, "warnings": warnings}
			if a.output != "human" {
				return a.printJSON(a.stdout, "CheckResult", true, data)
			}
			fmt.Fprintf(a.stdout, "%s: ok (%s, %d tasks)\n", clean(args[0]), clean(wf.Metadata.Name), len(wf.Spec.Tasks))
			return nil
		},
	}
	cmd.Flags().BoolVar(&remote, "remote", false, "also connect to the servers (under the file's policy), list their tools and check the tasks against them; recorded as a run of mode check")
	return cmd
}

// remoteCheckView is the data of `check --remote --output json`.
type remoteCheckView struct {
	File       string                   `json:"file"`
	Workflow   string                   `json:"workflow"`
	Digest     string                   `json:"digest"`
	Tasks      int                      `json:"tasks"`
	RunID      string                   `json:"runId"`
	State      string                   `json:"state"`
	ExitCode   int                      `json:"exitCode"`
	Error      *string                  `json:"error"`
	ErrorClass *string                  `json:"errorClass"`
	Servers    []workflow.CheckedServer `json:"servers"`
	Findings   []workflow.Finding       `json:"findings"`
	Problems   []diagnosticView         `json:"problems"`
	// Warnings are spec.Workflow.Warnings (a retry on an at_most_once or
	// unknown action): the file is valid.
	Warnings []diagnosticView `json:"warnings"`
}

// checkRemote runs `check --remote` and prints its findings.
func (a *app) checkRemote(cmd *cobra.Command, wf *spec.Workflow, warnings []diagnosticView) error {
	ctx := cmd.Context()
	return a.withDB(ctx, func(db *events.DB) error {
		if err := requireLogins(ctx, db, wf); err != nil {
			return err
		}
		res, err := a.runner(db).CheckRemote(ctx, wf, workflow.RunOptions{})
		if err != nil {
			return err
		}
		servers := res.Servers
		if servers == nil {
			servers = []workflow.CheckedServer{}
		}
		if a.output != "human" {
			v := remoteCheckView{File: wf.File, Workflow: wf.Metadata.Name, Digest: wf.Digest, Tasks: len(wf.Spec.Tasks),
				RunID: res.RunID, State: res.State, ExitCode: res.ExitCode, Servers: servers, Findings: res.Findings, Problems: []diagnosticView{}, Warnings: warnings}
			if res.Err != nil {
				msg, class := res.Err.Error(), checkClass(res)
				v.Error, v.ErrorClass = &msg, &class
			}
			if err := a.printJSON(a.stdout, "CheckResult", res.Err == nil, v); err != nil {
				return err
			}
		} else {
			// Findings quote remote text (tool names, schema messages): one
			// sanitizer for every line.
			for _, f := range res.Findings {
				fmt.Fprintln(a.stdout, clean(f.String()))
			}
			if res.Err == nil {
				fmt.Fprintf(a.stdout, "%s: ok against %d server(s) (%s, %d tasks)\n", clean(wf.File), len(servers), clean(wf.Metadata.Name), len(wf.Spec.Tasks))
				fmt.Fprintf(a.stderr, "check run %s %s (agentctl inspect %s)\n", res.RunID, res.State, res.RunID)
			}
		}
		if res.Err != nil {
			return &exitError{code: res.ExitCode, runID: res.RunID, err: res.Err}
		}
		return nil
	})
}

// checkClass is the error class of a check that did not pass: findings,
// or how the remote failed.
func checkClass(res *workflow.CheckResult) string {
	if len(res.Findings) > 0 && res.ExitCode == workflow.ExitInvalid {
		return "check_findings"
	}
	return errorClass(res.Err, res.ExitCode)
}
