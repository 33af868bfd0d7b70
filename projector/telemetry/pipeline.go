package telemetry

import (
	"context"
	"sync"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// exportEvery is how often a live pipeline sends what it folded.
const exportEvery = time.Second

// Pipeline exports the telemetry of the runs of one process from their
// committed events (Observe), in the background: it never blocks an
// append and never fails a run. Close flushes within Config.FlushTimeout.
// A nil *Pipeline is telemetry off: every method does nothing.
type Pipeline struct {
	x  *Exporter
	db *events.DB

	mu     sync.Mutex
	queue  []events.Event
	closed bool
	wake   chan struct{}
	stop   chan struct{}
	folded chan struct{} // closed when the folder has folded its last event

	// base is cancelled when Close's bound is reached: an export in flight
	// gives up.
	base   context.Context
	cancel context.CancelFunc

	batches chan batch
	done    sync.WaitGroup

	// owned by the folder goroutine
	runs  map[string]*liveRun
	buf   []*span
	marks map[string]int64 // run → last seq folded, not yet handed to the exporter

	marksMu sync.Mutex
	tainted map[string]bool // runs with a span that was not exported: no mark

	traceMu sync.Mutex
	traces  map[string]runTrace // run → its trace context, for requests
}

type liveRun struct {
	f *fold
}

// batch is spans to export and, per run, the seq every span ending at or
// before it is in this batch or an earlier one.
type batch struct {
	spans []*span
	marks map[string]int64
}

// Start returns a running pipeline for cfg, or nil when cfg is nil
// (telemetry off).
func Start(ctx context.Context, cfg *Config, db *events.DB) (*Pipeline, error) {
	if cfg == nil {
		return nil, nil
	}
	x, err := NewExporter(ctx, *cfg)
	if err != nil {
		return nil, err
	}
	p := &Pipeline{x: x, db: db, wake: make(chan struct{}, 1), stop: make(chan struct{}), folded: make(chan struct{}),
		batches: make(chan batch, 1), runs: map[string]*liveRun{}, marks: map[string]int64{}, tainted: map[string]bool{}, traces: map[string]runTrace{}}
	p.base, p.cancel = context.WithCancel(context.WithoutCancel(ctx))
	p.done.Add(2)
	go p.foldLoop()
	go p.exportLoop()
	return p, nil
}

// Exporter is the pipeline's exporter (counters for tests and metrics).
func (p *Pipeline) Exporter() *Exporter {
	if p == nil {
		return nil
	}
	return p.x
}

// Observe takes one committed event (a workflow.Runner's Observe, which
// sees a run's events in seq order after their commit). It only queues.
func (p *Pipeline) Observe(e events.Event) {
	if p == nil {
		return
	}
	p.mu.Lock()
	if !p.closed {
		p.queue = append(p.queue, e)
	}
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// Close stops taking events, exports what was folded and flushes the
// metrics, giving up at Config.FlushTimeout (or ctx's end): a collector
// that is down or slow costs at most that. What could not be exported is
// counted as dropped, and a later resume or `agentctl trace export` sends
// it (the mark of its run did not move).
func (p *Pipeline) Close(ctx context.Context) error {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.x.cfg.FlushTimeout)
	defer cancel()
	close(p.stop)
	finished := make(chan struct{})
	go func() {
		p.done.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-ctx.Done():
		p.cancel() // the export in flight gives up; its spans count as dropped
		<-finished
	}
	err := p.x.Shutdown(ctx)
	p.cancel()
	return err
}

func (p *Pipeline) foldLoop() {
	defer p.done.Done()
	defer close(p.batches)
	tick := time.NewTicker(exportEvery)
	defer tick.Stop()
	for {
		stopping := false
		flush := false
		select {
		case <-p.wake:
		case <-tick.C:
			flush = true
		case <-p.stop:
			stopping, flush = true, true
		}
		p.mu.Lock()
		evs := p.queue
		p.queue = nil
		p.mu.Unlock()
		for _, e := range evs {
			p.foldOne(e)
		}
		if flush || len(p.buf) >= p.x.cfg.MaxQueue/2 {
			p.cut(stopping)
		}
		if stopping {
			return
		}
	}
}

// foldOne folds e into its run, first catching up on the run's earlier
// events from the log when this process did not see them (a resume, a
// worker picking up a queued run).
func (p *Pipeline) foldOne(e events.Event) {
	r := p.runs[e.RunID]
	if r == nil {
		r = &liveRun{}
		mark := int64(0)
		if e.Seq > 1 {
			m, err := p.db.TelemetryMark(p.base, e.RunID)
			if err == nil {
				mark = m
			}
		}
		r.f = newFold(e.RunID, mark, p.keep, p.x.measure)
		if e.Seq > 1 {
			_ = p.db.ScanRange(p.base, e.RunID, 1, e.Seq-1, func(old events.Event) error {
				r.f.add(old)
				return nil
			})
		}
		p.runs[e.RunID] = r
	}
	r.f.add(e)
	p.marks[e.RunID] = e.Seq
	if e.Type == vocab.TypeRunFinished {
		p.cut(false)
		delete(p.runs, e.RunID)
		p.traceMu.Lock()
		delete(p.traces, e.RunID)
		p.traceMu.Unlock()
	}
}

// keep queues a finished span for export, dropping it when the queue is full.
func (p *Pipeline) keep(sp *span) {
	if len(p.buf) >= p.x.cfg.MaxQueue {
		p.x.drop(1)
		p.taint(sp)
		return
	}
	p.buf = append(p.buf, sp)
}

func (p *Pipeline) taint(sp *span) {
	for _, a := range sp.attrs {
		if a.Key == "agentctl.run.id" {
			p.marksMu.Lock()
			p.tainted[a.Value.AsString()] = true
			p.marksMu.Unlock()
			return
		}
	}
}

// cut hands the folded spans to the exporter. When it is busy they stay
// queued (bounded by keep), unless the pipeline is stopping.
func (p *Pipeline) cut(final bool) {
	if len(p.buf) == 0 && len(p.marks) == 0 {
		return
	}
	b := batch{spans: p.buf, marks: p.marks}
	if !final {
		select {
		case p.batches <- b:
		default:
			return // the exporter is busy: keep folding, send later
		}
	} else {
		select {
		case p.batches <- b:
		case <-p.base.Done():
			p.x.drop(len(b.spans))
		}
	}
	p.buf, p.marks = nil, map[string]int64{}
}

func (p *Pipeline) exportLoop() {
	defer p.done.Done()
	for b := range p.batches {
		if err := p.x.export(p.base, b.spans); err != nil {
			for _, sp := range b.spans {
				p.taint(sp)
			}
			continue
		}
		p.marksMu.Lock()
		var marks [][2]any
		for id, seq := range b.marks {
			if !p.tainted[id] {
				marks = append(marks, [2]any{id, seq})
			}
		}
		p.marksMu.Unlock()
		for _, m := range marks {
			_ = p.db.SetTelemetryMark(p.base, m[0].(string), m[1].(int64))
		}
	}
}
