package report

import (
	"sort"
	"time"
)

// The time axis adapts to runs whose work is short beside their idle
// stretches (a retry's wait, a resume hours later): an idle stretch (no
// task attempt running) longer than idleShare of the run is drawn
// gapW wide, with a break mark and its length, and the rest of the plot
// is linear over the busy time, so tasks of a few milliseconds that ran
// side by side are drawn side by side, not as dots at the left edge.
const (
	idleShare = 0.1
	gapW      = 40.0
)

// segment is a stretch of the run drawn from x0 to x1; a gap is a
// compressed idle stretch.
type segment struct {
	t0, t1 time.Time
	x0, x1 float64
	gap    bool
}

// axis maps a time of the run to x.
type axis struct {
	start time.Time
	segs  []segment
}

// svgGap is a compressed idle stretch as drawn.
type svgGap struct {
	X, W  float64
	Label string
	Title string
}

// newAxis lays out r's time over the plot: linear, but for the idle
// stretches it compresses.
func newAxis(r *Report) axis {
	end := r.End
	if end.Sub(r.Start) < time.Millisecond {
		end = r.Start.Add(time.Millisecond)
	}
	span := end.Sub(r.Start)
	// The busy intervals: every attempt, merged.
	type iv struct{ a, b time.Time }
	var busy []iv
	for _, l := range r.Lanes {
		for _, a := range l.Attempts {
			s, e := a.Start, a.End
			if s.IsZero() {
				continue
			}
			if e.Before(s) {
				e = s
			}
			busy = append(busy, iv{s, e})
		}
	}
	sort.Slice(busy, func(i, j int) bool { return busy[i].a.Before(busy[j].a) })
	var merged []iv
	for _, b := range busy {
		if n := len(merged); n > 0 && !b.a.After(merged[n-1].b) {
			if b.b.After(merged[n-1].b) {
				merged[n-1].b = b.b
			}
			continue
		}
		merged = append(merged, b)
	}
	// The stretches between them (and before the first, after the last).
	var segs []segment
	at := r.Start
	add := func(t0, t1 time.Time, idle bool) {
		if !t1.After(t0) {
			return
		}
		segs = append(segs, segment{t0: t0, t1: t1, gap: idle && t1.Sub(t0) > time.Duration(idleShare*float64(span))})
	}
	for _, b := range merged {
		add(at, b.a, true)
		if b.b.After(at) {
			add(maxTime(at, b.a), b.b, false)
			at = b.b
		}
	}
	add(at, end, true)
	var linear time.Duration
	gaps := 0
	for _, s := range segs {
		if s.gap {
			gaps++
		} else {
			linear += s.t1.Sub(s.t0)
		}
	}
	if gaps == 0 || linear <= 0 {
		return axis{start: r.Start, segs: []segment{{t0: r.Start, t1: end, x0: labelW, x1: labelW + plotW}}}
	}
	perNS := (plotW - float64(gaps)*gapW) / float64(linear)
	x := labelW
	for i := range segs {
		w := gapW
		if !segs[i].gap {
			w = float64(segs[i].t1.Sub(segs[i].t0)) * perNS
		}
		segs[i].x0, segs[i].x1 = x, x+w
		x += w
	}
	segs[len(segs)-1].x1 = labelW + plotW
	return axis{start: r.Start, segs: segs}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// x is t's position; a zero t is the run's start.
func (ax axis) x(t time.Time) float64 {
	if t.IsZero() {
		t = ax.start
	}
	first, last := ax.segs[0], ax.segs[len(ax.segs)-1]
	switch {
	case !t.After(first.t0):
		return round1(first.x0)
	case !t.Before(last.t1):
		return round1(last.x1)
	}
	for _, s := range ax.segs {
		if t.Before(s.t1) || t.Equal(s.t1) {
			f := float64(t.Sub(s.t0)) / float64(s.t1.Sub(s.t0))
			return round1(s.x0 + f*(s.x1-s.x0))
		}
	}
	return round1(last.x1)
}

// linear is the time drawn to scale (every stretch but the gaps).
func (ax axis) linear() time.Duration {
	var d time.Duration
	for _, s := range ax.segs {
		if !s.gap {
			d += s.t1.Sub(s.t0)
		}
	}
	return d
}

// ticks are the axis labels: a round step over the time drawn to scale,
// placed only where time is to scale (never inside a gap).
func (ax axis) ticks(want int) []svgTick {
	step := tickStep(max(ax.linear(), time.Nanosecond), want)
	var out []svgTick
	for _, s := range ax.segs {
		if s.gap {
			continue
		}
		from, to := s.t0.Sub(ax.start), s.t1.Sub(ax.start)
		d := (from + step - 1) / step * step
		for ; d <= to; d += step {
			out = append(out, svgTick{X: ax.x(ax.start.Add(d)), Label: tickLabel(d, step)})
		}
	}
	return out
}

// gaps are the compressed stretches as drawn.
func (ax axis) gaps() []svgGap {
	var out []svgGap
	for _, s := range ax.segs {
		if s.gap {
			d := s.t1.Sub(s.t0)
			out = append(out, svgGap{X: round1(s.x0), W: round1(s.x1 - s.x0), Label: "⋯ " + Dur(d),
				Title: "nothing ran for " + Dur(d) + " (from " + Offset(ax.start, s.t0) + " to " + Offset(ax.start, s.t1) + "): drawn shortened"})
		}
	}
	return out
}
