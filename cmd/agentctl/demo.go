package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/examples"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

func (a *app) demoCmd() *cobra.Command {
	var f runFlags
	var stdio bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Start the demo MCP server in-process and run examples/lookup.yaml against it",
		Long: `demo starts a real MCP server (built with the official Go SDK) on 127.0.0.1, runs the
example workflow against it through agentctl's own HTTP client, records every step in the
database, and prints the outputs and an inspect summary.`,
		Example: `  agentctl demo
  agentctl demo --input query="event sourcing" --db /tmp/demo.db`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if stdio {
				return a.demoStdio(ctx, f)
			}
			srv := demoserver.New(demoserver.Options{})
			url, stop, err := srv.Serve(ctx, "127.0.0.1:8765")
			if err != nil { // the usual port is taken: any free loopback port will do
				url, stop, err = srv.Serve(ctx, "127.0.0.1:0")
				if err != nil {
					return &exitError{code: workflow.ExitRemote, err: fmt.Errorf("start demo server: %w", err)}
				}
			}
			defer func() {
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = stop(sctx)
			}()
			src := bytes.ReplaceAll(examples.Lookup, []byte(examples.DemoURL), []byte(url))
			wf, err := spec.Parse(examples.LookupFile, src)
			if err != nil {
				return &exitError{code: workflow.ExitInvalid, err: err}
			}
			inputs, err := f.resolve(wf)
			if err != nil {
				return err
			}
			return a.withDB(ctx, func(db *events.DB) error {
				fmt.Fprintf(a.stderr, "demo server %s (agentctl-demo, go-sdk)\n", url)
				res, err := a.runner(db).Run(ctx, wf, inputs, workflow.RunOptions{Command: "demo"})
				if err != nil {
					return err
				}
				if a.output != "human" {
					return a.printResult(ctx, db, res)
				}
				if err := a.printResult(ctx, db, res); err != nil {
					return err
				}
				doc, err := projector.Inspect(ctx, db, res.RunID)
				if err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "\nrun %s: %s, %d tasks, %d calls, %d events (database %s)\n", doc.Run.RunID, doc.Run.State, len(doc.Tasks), doc.Run.Calls, doc.Run.Events, db.Path())
				fmt.Fprintf(a.stdout, "next: agentctl inspect %s\n", res.RunID)
				return nil
			})
		},
	}
	f.register(cmd)
	cmd.Flags().BoolVar(&stdio, "stdio", false, "run the demo server as a child process over stdio (this binary, `demo serve --stdio`)")
	cmd.AddCommand(a.demoServeCmd())
	return cmd
}

// demoStdio runs examples/lookup.yaml with its server replaced by this
// binary's `demo serve --stdio`, a child process.
func (a *app) demoStdio(ctx context.Context, f runFlags) error {
	self, err := os.Executable()
	if err != nil {
		return &exitError{code: workflow.ExitInvalid, err: fmt.Errorf("demo --stdio: locate this binary: %w", err)}
	}
	wf, err := spec.Parse(examples.LookupFile, examples.Lookup)
	if err != nil {
		return &exitError{code: workflow.ExitInvalid, err: err}
	}
	for name, srv := range wf.Spec.MCPServers {
		srv.URL, srv.Command = "", []string{self, "demo", "serve", "--stdio"}
		srv.Env = map[string]spec.EnvValueSpec{}
		if testHooks.demoServerEnv != nil {
			testHooks.demoServerEnv(srv.Env)
		}
		wf.Spec.MCPServers[name] = srv
	}
	wf.Spec.Policy.CommandAllowlist = []string{self}
	if wf, err = spec.Build(examples.LookupFile, *wf); err != nil {
		return &exitError{code: workflow.ExitInvalid, err: err}
	}
	inputs, err := f.resolve(wf)
	if err != nil {
		return err
	}
	return a.withDB(ctx, func(db *events.DB) error {
		fmt.Fprintf(a.stderr, "demo server: %s demo serve --stdio (agentctl-demo, go-sdk, a child process)\n", self)
		res, err := a.runner(db).Run(ctx, wf, inputs, workflow.RunOptions{Command: "demo --stdio"})
		if err != nil {
			return err
		}
		if err := a.printResult(ctx, db, res); err != nil {
			return err
		}
		if a.output == "human" {
			fmt.Fprintf(a.stdout, "next: agentctl inspect %s\n", res.RunID)
		}
		return nil
	})
}

func (a *app) demoServeCmd() *cobra.Command {
	var addr, protocol string
	var stdio bool
	cmd := &cobra.Command{
		Use:     "serve",
		Short:   "Serve the demo MCP server until interrupted",
		Example: "  agentctl demo serve --addr 127.0.0.1:8765 &\n  agentctl run examples/lookup.yaml --input query=mcp\n  agentctl demo serve --protocol 2026-07-28 --addr 127.0.0.1:8766",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer cancel()
			if protocol != "" && protocol != "2025-11-25" && protocol != demoserver.Protocol20260728 {
				return usageErr("--protocol %q: want 2025-11-25 or %s", protocol, demoserver.Protocol20260728)
			}
			srv := demoserver.New(demoserver.Options{Protocol: protocol})
			if stdio { // one session on stdin/stdout, until stdin closes
				if err := srv.ServeStdio(ctx, os.Stdin, os.Stdout); err != nil && ctx.Err() == nil {
					return &exitError{code: workflow.ExitRemote, err: fmt.Errorf("demo server (stdio): %w", err)}
				}
				return nil
			}
			url, stop, err := srv.Serve(ctx, addr)
			if err != nil {
				return &exitError{code: workflow.ExitInvalid, err: err}
			}
			fmt.Fprintf(a.stdout, "serving agentctl-demo MCP server at %s (Ctrl-C to stop)\n", url)
			<-ctx.Done()
			sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer scancel()
			if err := stop(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8765", "loopback address to listen on")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "serve one MCP session on stdin/stdout instead (a stdio server)")
	cmd.Flags().StringVar(&protocol, "protocol", "", "speak only this MCP revision: 2025-11-25, or 2026-07-28 (stateless, with the tools confirm and regional); default: every revision the go-sdk speaks")
	return cmd
}
