package report

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"
)

// Geometry of the timeline, in SVG user units (CSS pixels at 100%).
const (
	labelW  = 180.0 // the task names left of the plot
	plotW   = 900.0 // the time axis
	rightW  = 24.0
	axisH   = 34.0 // tick labels above the lanes
	laneH   = 36.0
	barY    = 8.0  // bar top within a lane
	barH    = 22.0 // bar height
	callY   = 20.0 // call stripe top within a lane
	callH   = 8.0
	markY   = 14.0 // marker centre within a lane
	bandY   = 9.0  // aggregated marks (progress, polls) within a lane
	minBarW = 6.0  // an attempt of a few microseconds is still a bar, not a dot
	minCall = 3.0  // the same for a call's stripe and an aggregated mark
)

// svgTimeline is the drawn timeline: every coordinate computed here, so the
// template only places numbers and escaped text.
type svgTimeline struct {
	Width, Height float64
	PlotLeft      float64
	PlotRight     float64
	AxisY         float64
	Ticks         []svgTick
	Gaps          []svgGap // idle stretches drawn shortened (axis.go)
	Lanes         []svgLane
	RunMarks      []svgRunMark
}

type svgTick struct {
	X     float64
	Label string
}

type svgLane struct {
	TaskID  string
	Label   string
	Y       float64 // top of the lane
	TextY   float64
	Odd     bool
	Bars    []svgBar
	Calls   []svgCall
	Marks   []svgMark
	Skipped []svgSkip
}

type svgBar struct {
	X, Y, W, H float64
	State      string // a class name (stateClass)
	Attempt    int
	StartUS    int64 // microseconds from the run's first event (tests read it from the DOM)
	EndUS      int64 // the same, for the attempt's end
	Title      string
}

type svgCall struct {
	X, Y, W, H float64
	State      string
	Title      string
}

// svgMark is one marker: Shape picks the drawing, Points/D carry it.
type svgMark struct {
	Kind   string
	Shape  string // "poly", "circle", "cross", "band", "line"
	X, Y   float64
	X2     float64 // bands and lines
	Y2     float64
	Points string // polygon points, or the path of a cross
	Title  string
}

type svgSkip struct {
	X, Y, W, H float64
	Title      string
}

type svgRunMark struct {
	X, Y1, Y2 float64
	Label     string
	Title     string
}

// layout computes the timeline drawing of r.
func layout(r *Report) svgTimeline {
	ax := newAxis(r)
	x := ax.x
	tl := svgTimeline{Width: labelW + plotW + rightW, PlotLeft: labelW, PlotRight: labelW + plotW, AxisY: axisH - 8,
		Height: axisH + float64(max(len(r.Lanes), 1))*laneH + 8}
	tl.Ticks, tl.Gaps = ax.ticks(8), ax.gaps()
	for i, l := range r.Lanes {
		y := axisH + float64(i)*laneH
		sl := svgLane{TaskID: l.TaskID, Label: shorten(l.TaskID, 24), Y: y, TextY: y + laneH/2 + 4, Odd: i%2 == 1}
		attempts := append([]*Attempt(nil), l.Attempts...)
		sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].Start.Before(attempts[j].Start) })
		for _, a := range attempts {
			x0, x1 := x(a.Start), x(a.End)
			title := fmt.Sprintf("%s attempt %d: %s/%s %s, %s from %s", l.TaskID, a.Attempt, a.Server, a.Tool, a.State, Dur(a.End.Sub(a.Start)), Offset(r.Start, a.Start))
			if a.Error != "" {
				title += ": " + a.Error
			}
			sl.Bars = append(sl.Bars, svgBar{X: x0, Y: y + barY, W: max(x1-x0, minBarW), H: barH, State: stateClass(a.State),
				Attempt: a.Attempt, StartUS: a.Start.Sub(r.Start).Microseconds(), EndUS: a.End.Sub(r.Start).Microseconds(), Title: title})
			for _, c := range a.Calls {
				cx0, cx1 := x(c.Start), x(c.End)
				sl.Calls = append(sl.Calls, svgCall{X: cx0, Y: y + callY, W: max(cx1-cx0, minCall), H: callH, State: stateClass(c.Status),
					Title: fmt.Sprintf("call %s %s/%s (%s): %s, %s", short(c.EffectID), c.Server, c.Tool, c.Idempotency, c.Status, Dur(c.End.Sub(c.Start)))})
				sl.Marks = append(sl.Marks, callMarks(r, c, y, x)...)
			}
		}
		for _, m := range l.Marks {
			mx := x(m.At)
			title := m.Kind + " at " + Offset(r.Start, m.At)
			if m.Detail != "" {
				title += ": " + m.Detail
			}
			if m.Kind == "skipped" {
				sl.Skipped = append(sl.Skipped, svgSkip{X: mx, Y: y + barY, W: 60, H: barH, Title: title})
				continue
			}
			top := y + 4
			if m.Kind == "session" {
				top = y + barY + 2
			}
			sl.Marks = append(sl.Marks, svgMark{Kind: m.Kind, Shape: "line", X: mx, Y: top, X2: mx, Y2: y + barY + barH - 2, Title: title})
		}
		tl.Lanes = append(tl.Lanes, sl)
	}
	for _, m := range r.RunMarks {
		tl.RunMarks = append(tl.RunMarks, svgRunMark{X: x(m.At), Y1: axisH - 4, Y2: tl.Height - 4, Label: m.Kind,
			Title: m.Detail + " at " + Offset(r.Start, m.At)})
	}
	return tl
}

// markOrder is the order markers are drawn in (later on top).
var markOrder = []string{MarkProgress, MarkPoll, MarkReplayed, MarkSent, MarkResumed, MarkLost, MarkRedispatch, MarkError, MarkResult}

// markNames are the legend's words for each marker kind.
var markNames = map[string]string{
	MarkSent: "request sent", MarkProgress: "progress", MarkPoll: "task polls", MarkResumed: "stream resumed",
	MarkLost: "session lost", MarkRedispatch: "redispatch", MarkResult: "result", MarkError: "error recorded",
	MarkReplayed: "recorded frames replayed",
}

// aggregated kinds are drawn as one band from the first to the last.
func aggregated(kind string) bool {
	return kind == MarkProgress || kind == MarkPoll || kind == MarkReplayed
}

func callMarks(r *Report, c *Call, laneY float64, x func(time.Time) float64) []svgMark {
	var out []svgMark
	cy := laneY + markY
	for _, kind := range markOrder {
		m := c.Marks[kind]
		if m == nil {
			continue
		}
		if aggregated(kind) {
			x0, x1 := x(m.First), x(m.Last)
			out = append(out, svgMark{Kind: kind, Shape: "band", X: x0, X2: max(x1, x0+minCall), Y: laneY + bandY, Y2: laneY + bandY,
				Title: fmt.Sprintf("%s ×%d, %s to %s (call %s)", markNames[kind], m.Count, Offset(r.Start, m.First), Offset(r.Start, m.Last), short(c.EffectID))})
			continue
		}
		for i, at := range m.Points {
			px := x(at)
			title := fmt.Sprintf("%s at %s (call %s)", markNames[kind], Offset(r.Start, at), short(c.EffectID))
			if i == len(m.Points)-1 && m.Count > len(m.Points) {
				title += fmt.Sprintf("; %d more not drawn", m.Count-len(m.Points))
			}
			sm := svgMark{Kind: kind, X: px, Y: cy, Title: title}
			switch kind {
			case MarkSent:
				sm.Shape, sm.Points = "poly", pts(px-4, cy-5, px+4, cy, px-4, cy+5)
			case MarkResumed:
				sm.Shape, sm.Points = "poly", pts(px, cy-5, px+4, cy, px, cy+5, px-4, cy)
			case MarkError: // a cross
				sm.Shape = "cross"
				sm.Points = "M" + pts(px-4, cy-4) + "L" + pts(px+4, cy+4) + "M" + pts(px-4, cy+4) + "L" + pts(px+4, cy-4)
			case MarkLost: // a broken link: two hooks apart, unlike the error's cross
				sm.Shape = "cross"
				sm.Points = "M" + pts(px-5, cy-3) + "L" + pts(px-2, cy-3) + "L" + pts(px-2, cy+3) + "L" + pts(px-5, cy+3) +
					"M" + pts(px+5, cy-3) + "L" + pts(px+2, cy-3) + "L" + pts(px+2, cy+3) + "L" + pts(px+5, cy+3)
			default:
				sm.Shape = "circle"
			}
			out = append(out, sm)
		}
	}
	return out
}

// tickStep picks the axis step: 1, 2 or 5 × 10^n (in nanoseconds; seconds
// and minutes are powers of ten of a nanosecond too), the smallest that
// gives at most want ticks over span.
func tickStep(span time.Duration, want int) time.Duration {
	raw := float64(span) / float64(want)
	if raw < 1 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return time.Duration(m * p)
		}
	}
	return time.Duration(10 * p)
}

// tickLabel writes d in the largest unit in which the step is under 100
// units (10ms steps read "10ms, 20ms", 500ms steps "0.5s, 1s").
func tickLabel(d, step time.Duration) string {
	switch {
	case d == 0:
		return "0"
	case step < 100*time.Nanosecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	case step < 100*time.Microsecond:
		return trim(float64(d)/float64(time.Microsecond)) + "µs"
	case step < 100*time.Millisecond:
		return trim(float64(d)/float64(time.Millisecond)) + "ms"
	case step < 100*time.Second && d < 100*time.Second:
		return trim(d.Seconds()) + "s"
	default:
		return d.Truncate(time.Second).String()
	}
}

func trim(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func pts(xy ...float64) string {
	var b []byte
	for i, v := range xy {
		if i > 0 {
			if i%2 == 0 {
				b = append(b, ' ')
			} else {
				b = append(b, ',')
			}
		}
		b = strconv.AppendFloat(b, round1(v), 'f', -1, 64)
	}
	return string(b)
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// stateClass maps a state to a CSS class; states this report does not know
// share one neutral colour.
func stateClass(s string) string {
	switch s {
	case "succeeded", "failed", "uncertain", "cancelled", "skipped", "running", "prepared", "dispatched",
		"reconnecting", "redispatched", "accepted", "polling", "recorded":
		return s
	}
	return "other"
}

// Dur prints a duration rounded for people.
func Dur(d time.Duration) string {
	switch {
	case d < time.Microsecond:
		return d.String()
	case d < time.Millisecond:
		return d.Round(time.Microsecond).String()
	case d < time.Second:
		return d.Round(10 * time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// Offset prints t as the time since start, "+12.34ms".
func Offset(start, t time.Time) string {
	return "+" + Dur(t.Sub(start))
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// shorten cuts s to n runes with an ellipsis.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
