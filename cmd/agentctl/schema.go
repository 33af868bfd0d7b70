package main

import (
	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/workflow/spec"
)

func (a *app) schemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema (2020-12) of the workflow file format, for editors",
		Long: `schema prints the JSON Schema of agentctl workflow files, generated from the Go types the
parser uses. Point your editor's YAML language server at it to get validation and completion:
  # yaml-language-server: $schema=./agentctl.schema.json`,
		Example: "  agentctl schema > agentctl.schema.json",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := a.stdout.Write(spec.JSONSchema())
			return err
		},
	}
}
