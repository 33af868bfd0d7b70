package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/migrations"
	"github.com/agentctl/agentctl/transport"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

func commit() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print version, commit, Go version, schema version and MCP protocol version",
		Example: "  agentctl version --output json",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			data := map[string]any{"version": version, "commit": commit(), "go": runtime.Version(),
				"schemaVersion": migrations.Latest, "protocolVersion": transport.ProtocolVersion}
			if a.output != "human" {
				return a.printJSON(a.stdout, "Version", true, data)
			}
			fmt.Fprintf(a.stdout, "agentctl %s\ncommit    %s\ngo        %s\nschema    %d\nprotocol  %s\n", version, commit(), runtime.Version(), migrations.Latest, transport.ProtocolVersion)
			return nil
		},
	}
}
