package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/projector/telemetry"
	"github.com/agentctl/agentctl/workflow"
)

// traceExportTimeout bounds `trace export` (a whole run in one request).
const traceExportTimeout = 30 * time.Second

func (a *app) traceCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "trace",
		Short: "OpenTelemetry traces built from the log (docs/TELEMETRY.md)",
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "export RUN_ID",
		Short: "Send a recorded run's trace and metrics to the OTLP collector the OTEL_* variables name",
		Long: `trace export folds the run's log into the spans and metric points a live run exports (one
client span per MCP request, one span per task attempt, one for the run, all in the trace derived
from the run id, or the caller's trace when the run was started under TRACEPARENT) and sends them
to the collector named by OTEL_EXPORTER_OTLP_ENDPOINT (or _TRACES_ENDPOINT), over
OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf or grpc). Use it for runs recorded before telemetry was
on, replays, or audit evidence. Span ids come from the log, so exporting twice sends the same
spans. Spans still open (a run killed and never resumed) end at its last event. Nothing is
written to the database.`,
		Example: `  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 agentctl trace export last`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg := a.telemetryConfig()
			if cfg == nil || !cfg.Traces {
				return usageErr("trace export: no collector: set OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)")
			}
			return a.withExistingDB(cmd.Context(), func(db *events.DB) error {
				id, err := projector.ResolveRun(cmd.Context(), db, args[0])
				if err != nil {
					return err
				}
				ctx, cancel := context.WithTimeout(cmd.Context(), traceExportTimeout)
				defer cancel()
				sum, err := telemetry.ExportRun(ctx, *cfg, db, id)
				if err != nil {
					return &exitError{code: workflow.ExitRemote, runID: id, err: err}
				}
				if a.output != "human" {
					return a.printJSON(a.stdout, "TraceExport", true, sum)
				}
				fmt.Fprintf(a.stdout, "run %s: %d spans sent in trace %s\n", sum.RunID, sum.Spans, sum.TraceID)
				return nil
			})
		},
	})
	return cmd
}
