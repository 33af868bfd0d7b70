package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/workflow/spec"
)

func (a *app) checkCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Check a workflow file: syntax, references, templates, needs cycles and network policy",
		Long: `check parses a workflow file, resolves every reference (servers, actions, tasks, needs,
template paths) and checks every server URL against the policy. It reports every problem at
once as file:line:col: field: message and exits 2 if there is any (3 when every problem is a
policy refusal, as for run and mcp). run performs the same check before it records anything.`,
		Example: "  agentctl check examples/lookup.yaml\n  agentctl check wf.yaml --output json",
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			wf, err := spec.Load(args[0])
			if err != nil {
				var ds spec.Diagnostics
				if a.output != "human" && errors.As(err, &ds) {
					_ = a.printJSON(a.stdout, "CheckResult", false, map[string]any{"file": args[0], "problems": viewDiagnostics(ds)})
				}
				return invalid(err)
			}
			data := map[string]any{"file": args[0], "workflow": wf.Metadata.Name, "digest": wf.Digest, "tasks": len(wf.Spec.Tasks), "problems": []diagnosticView{}}
			if a.output != "human" {
				return a.printJSON(a.stdout, "CheckResult", true, data)
			}
			fmt.Fprintf(a.stdout, "%s: ok (%s, %d tasks)\n", args[0], wf.Metadata.Name, len(wf.Spec.Tasks))
			return nil
		},
	}
}
