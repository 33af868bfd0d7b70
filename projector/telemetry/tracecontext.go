package telemetry

import (
	"go.opentelemetry.io/otel/trace"

	"github.com/agentctl/agentctl/events"
)

// runTrace is the trace context a run's requests carry.
type runTrace struct {
	id    trace.TraceID
	state string
}

// TraceContext returns the per-request W3C trace context of runID's
// requests (transport.Config.TraceContext): the run's trace, and a new span
// id for each request, which the fold reads back from the request as
// recorded. Nil on a nil Pipeline (telemetry off: nothing is sent).
func (p *Pipeline) TraceContext(runID string) func() (string, string) {
	if p == nil || p.x.spans == nil {
		return nil
	}
	p.traceMu.Lock()
	rt, ok := p.traces[runID]
	if !ok {
		rt = runTrace{id: TraceID(runID)}
		// run.created is committed before any remote is dialed.
		_ = p.db.ScanRange(p.base, runID, 1, 1, func(e events.Event) error {
			if c := runCreatedOf(e); c != nil {
				if sc, ok := ParseTraceparent(c.TraceParent); ok {
					rt = runTrace{id: sc.TraceID(), state: c.TraceState}
				}
			}
			return nil
		})
		p.traces[runID] = rt
	}
	p.traceMu.Unlock()
	return func() (string, string) { return traceparent(rt.id, randomSpanID()), rt.state }
}
