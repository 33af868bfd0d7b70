package telemetry

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentctl/agentctl/events"
)

// Summary is what ExportRun sent.
type Summary struct {
	RunID   string `json:"runId"`
	TraceID string `json:"traceId"`
	Spans   int    `json:"spans"`
	// Open is how many of those spans were still open at the end of the
	// log (a run killed and not resumed): they end at its last event.
	Open int `json:"open"`
}

// ExportRun sends the whole trace of a recorded run, and its metric
// points, after the fact (runs recorded before telemetry was on, replays,
// audit evidence), whatever was exported before: span ids are derived
// from the log, so a collector sees the same spans again. It does not
// write to the database. ctx bounds the export.
func ExportRun(ctx context.Context, cfg Config, db *events.DB, runID string) (*Summary, error) {
	if !cfg.Traces {
		return nil, errors.New("no trace endpoint: set OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	}
	x, err := NewExporter(ctx, cfg)
	if err != nil {
		return nil, err
	}
	var spans []*span
	f := newFold(runID, 0, func(sp *span) { spans = append(spans, sp) }, x.measure)
	if err := db.Scan(ctx, runID, 0, func(e events.Event) error {
		f.add(e)
		return nil
	}); err != nil {
		return nil, err
	}
	if f.err != nil {
		return nil, f.err
	}
	open := f.open()
	spans = append(spans, open...)
	sum := &Summary{RunID: runID, TraceID: f.traceID.String(), Spans: len(spans), Open: len(open)}
	err = x.export(ctx, spans)
	if serr := x.Shutdown(ctx); err == nil {
		err = serr
	}
	if err != nil {
		return nil, fmt.Errorf("export the trace of run %s: %w", runID, err)
	}
	return sum, nil
}
