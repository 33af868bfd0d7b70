package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/termtext"
)

// progress shows a run to a human on stderr, from the events as they are
// persisted (never from anything that is not in the log). On a terminal it
// keeps one live line per running call (task, tool, elapsed, and the last
// persisted progress notification, with a bar when the total is known),
// redrawn in place, with the lasting lines printed above it; elsewhere it
// prints plain lines. summary ends the output with one row per task.
//
// observe is called by the run loop; the terminal redraw ticker calls
// redraw from its own goroutine, so both take mu.
type progress struct {
	w     io.Writer
	tty   bool // redraw live lines in place
	color bool // colour state words
	now   func() time.Time

	mu       sync.Mutex
	drawn    int               // live lines on screen
	calls    map[string]*row   // running call by effect id
	tasks    []*row            // every task attempt seen, in order
	byKey    map[string]*row   // task id/attempt → row
	gens     map[string]int    // remote → last generation opened
	stop     chan struct{}     // closes the ticker; nil when none runs
	done     sync.WaitGroup    // the ticker goroutine
	last     map[string]string // effect id → last transition target
	mcpTasks map[string]string // effect id → its MCP task's id digest

	summarized bool
	// shortID gives a run's short form for its first line; nil: none.
	shortID func(runID string) string
	// from adds the state a call leaves to each of its lines (inspect
	// --follow: "dispatched → succeeded").
	from bool
}

// row is one task attempt as shown live and in the summary.
type row struct {
	task, server, tool string
	attempt            int
	state              string
	started, ended     time.Time
	generation         int
	reconnects         int
	running            bool
	// the last persisted progress notification
	progress, total float64
	hasTotal        bool
	message         string
	seen            bool
	reason          string // why the task was skipped
}

// statter is what a terminal check needs of a writer; *os.File has it.
type statter interface{ Stat() (os.FileInfo, error) }

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(statter)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// useColor decides colour: only on a terminal, never with NO_COLOR set or
// --color never.
func useColor(mode string, tty bool) bool {
	switch mode {
	case "always": // an explicit flag beats the environment
		return true
	case "never":
		return false
	}
	_, noColor := os.LookupEnv("NO_COLOR")
	return tty && !noColor
}

func newProgress(w io.Writer, color string) *progress {
	tty := isTerminal(w)
	return &progress{w: w, tty: tty, color: useColor(color, tty), now: time.Now,
		calls: map[string]*row{}, byKey: map[string]*row{}, gens: map[string]int{}, last: map[string]string{}, mcpTasks: map[string]string{}}
}

// refreshEvery is how often a terminal's live lines are redrawn to move
// the elapsed time on between events.
const refreshEvery = 200 * time.Millisecond

func (p *progress) observe(e events.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, _ := time.Parse(time.RFC3339Nano, e.CreatedAt)
	switch e.Type {
	case vocab.TypeRunCreated:
		// The id first, so that a run killed before its end can be found:
		// its short form (what to type), then the full id.
		if p.shortID != nil {
			if s := p.shortID(e.RunID); s != e.RunID {
				p.line("run %s started (%s)", clean(s), clean(e.RunID))
				return
			}
		}
		p.line("run %s started", clean(e.RunID))
	case vocab.TypeRunResumed:
		p.line("run %s resumed", clean(e.RunID))
	case vocab.TypeTaskStarted:
		t, err := vocab.Decode[vocab.TaskStarted](e)
		if err != nil || t.Tool == "" {
			return
		}
		r := &row{task: t.TaskID, attempt: t.Attempt, server: t.Server, tool: t.Tool, state: "running", started: at}
		p.tasks = append(p.tasks, r)
		p.byKey[fmt.Sprintf("%s/%d", t.TaskID, t.Attempt)] = r
		p.line("▶ %s  %s/%s (%s)", clean(t.TaskID), clean(t.Server), clean(t.Tool), t.Idempotency)
	case vocab.TypeSessionOpened:
		s, err := vocab.Decode[vocab.SessionOpened](e)
		if err != nil {
			return
		}
		p.gens[s.Remote] = s.Generation
		p.line("  session %s generation %d (%s)", clean(s.Remote), s.Generation, clean(s.ProtocolVersion))
	case vocab.TypeCallPrepared:
		c, err := vocab.Decode[vocab.CallPrepared](e)
		if err != nil {
			return
		}
		if r := p.byKey[fmt.Sprintf("%s/%d", c.TaskID, c.Attempt)]; r != nil {
			r.generation, r.running = c.Generation, true
			p.calls[c.EffectID] = r
			p.startTicker()
		}
		p.last[c.EffectID] = "prepared"
	case vocab.TypeCallTaskAccepted, vocab.TypeCallTaskStatus:
		p.taskStatus(e)
	case vocab.FramePrefix + "notification":
		p.notification(e)
	case vocab.TypeTaskSkipped:
		t, err := vocab.Decode[vocab.TaskSkipped](e)
		if err != nil {
			return
		}
		r := &row{task: t.TaskID, attempt: t.Attempt, state: "skipped", reason: clean(t.Reason)}
		p.tasks = append(p.tasks, r)
		p.line("  %s %s: %s", clean(t.TaskID), p.paint("skipped"), clean(t.Reason))
	case vocab.TypeTaskRetry:
		t, err := vocab.Decode[vocab.TaskRetryScheduled](e)
		if err != nil {
			return
		}
		p.line("  %s retry (attempt %d) not before %s", clean(t.TaskID), t.Attempt, clean(t.NotBefore))
	case vocab.TypeTaskFinished:
		p.taskFinished(e, at)
	}
	// A call's move, recorded by the fact that caused it (or, in an older
	// log, as call.transition), after what the fact itself shows.
	if t, ok, err := vocab.EventMove(e); ok && err == nil {
		p.move(t)
	}
}

// move shows a call's transition.
func (p *progress) move(t vocab.CallTransition) {
	if t.From == "" {
		t.From = p.last[t.EffectID]
	}
	p.last[t.EffectID] = t.To
	r := p.calls[t.EffectID]
	if r != nil {
		r.generation = max(r.generation, t.Generation)
		if t.To == "reconnecting" {
			r.reconnects++
		}
	}
	if t.To == "dispatched" {
		p.redraw()
		return
	}
	if r != nil && terminal(t.To) {
		r.running = false
	}
	reason := ""
	if t.Reason != "" {
		reason = ": " + clean(t.Reason)
	}
	task := "" // concurrent tasks interleave their lines: name the task
	if r != nil {
		task = " (" + clean(r.task) + ")"
	}
	from := ""
	if p.from && t.From != "" {
		from = " " + clean(t.From)
	}
	p.line("  call %s%s%s → %s%s", short(t.EffectID), task, from, p.paint(t.To), reason)
}

// taskFinished ends a task's row.
func (p *progress) taskFinished(e events.Event, at time.Time) {
	t, err := vocab.Decode[vocab.TaskFinished](e)
	if err != nil {
		return
	}
	if r := p.byKey[fmt.Sprintf("%s/%d", t.TaskID, t.Attempt)]; r != nil {
		r.state, r.ended, r.running = t.State, at, false
		for id, c := range p.calls {
			if c == r {
				delete(p.calls, id)
			}
		}
	}
	p.line("  %s %s", clean(t.TaskID), p.paint(t.State))
}

// notification records a persisted notifications/progress for its call.
func (p *progress) notification(e events.Event) {
	f, err := vocab.Decode[vocab.Frame](e)
	if err != nil || f.Method != "notifications/progress" {
		return
	}
	var n struct {
		Params struct {
			Progress float64  `json:"progress"`
			Total    *float64 `json:"total"`
			Message  string   `json:"message"`
		} `json:"params"`
	}
	if json.Unmarshal(f.Body, &n) != nil {
		return
	}
	if r := p.calls[f.EffectID]; r != nil {
		r.seen, r.progress, r.message = true, n.Params.Progress, clean(n.Params.Message)
		r.hasTotal = n.Params.Total != nil && *n.Params.Total > 0
		if r.hasTotal {
			r.total = *n.Params.Total
		}
	}
	if p.tty {
		p.redraw()
		return
	}
	msg := ""
	if m := clean(n.Params.Message); m != "" {
		msg = " " + m
	}
	if n.Params.Total != nil {
		p.line("  progress %g/%g%s", n.Params.Progress, *n.Params.Total, msg)
	} else {
		p.line("  progress %g%s", n.Params.Progress, msg)
	}
}

// line prints a lasting line: on a terminal, above the live lines.
func (p *progress) line(format string, args ...any) {
	p.clear()
	fmt.Fprintf(p.w, format+"\n", args...)
	p.draw()
}

// clear erases the live lines (terminal only).
func (p *progress) clear() {
	if !p.tty || p.drawn == 0 {
		return
	}
	fmt.Fprintf(p.w, "\r\x1b[K")
	for range p.drawn - 1 {
		fmt.Fprintf(p.w, "\x1b[1A\r\x1b[K")
	}
	p.drawn = 0
}

// draw prints one live line per running call (terminal only).
func (p *progress) draw() {
	if !p.tty {
		return
	}
	var lines []string
	for _, r := range p.tasks {
		if r.running {
			lines = append(lines, p.live(r))
		}
	}
	fmt.Fprint(p.w, strings.Join(lines, "\n"))
	p.drawn = len(lines)
}

func (p *progress) redraw() {
	p.clear()
	p.draw()
}

// live renders a running call: "⋯ task  server/tool  1.2s  [###.......] 3/10 message".
func (p *progress) live(r *row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "… %s  %s/%s  %s", clean(r.task), clean(r.server), clean(r.tool), p.now().Sub(r.started).Round(100*time.Millisecond))
	if r.seen {
		if r.hasTotal {
			fmt.Fprintf(&b, "  %s %g/%g", bar(r.progress, r.total, 10), r.progress, r.total)
		} else {
			fmt.Fprintf(&b, "  %g", r.progress)
		}
		if r.message != "" {
			b.WriteString(" " + r.message)
		}
	}
	return b.String()
}

// bar draws [#####.....] for n of total in width cells.
func bar(n, total float64, width int) string {
	filled := 0
	if total > 0 {
		filled = int(n / total * float64(width))
	}
	filled = min(max(filled, 0), width)
	return "[" + strings.Repeat("#", filled) + strings.Repeat(".", width-filled) + "]"
}

// startTicker moves the elapsed time on while a call runs (terminal only).
func (p *progress) startTicker() {
	if !p.tty || p.stop != nil {
		return
	}
	p.stop = make(chan struct{})
	p.done.Add(1)
	go func(stop <-chan struct{}) {
		defer p.done.Done()
		t := time.NewTicker(refreshEvery)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.mu.Lock()
				p.redraw()
				p.mu.Unlock()
			}
		}
	}(p.stop)
}

// summary stops the live lines and prints one row per task attempt seen:
// task, tool, status, duration, generation/reconnects.
func (p *progress) summary() {
	p.mu.Lock()
	if p.summarized {
		p.mu.Unlock()
		return
	}
	p.summarized = true
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
	p.mu.Unlock()
	p.done.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.clear()
	if len(p.tasks) == 0 {
		return
	}
	fmt.Fprintln(p.w)
	rows := [][]string{{"TASK", "TOOL", "STATUS", "DURATION", "GEN/RECONNECTS"}}
	for _, r := range p.tasks {
		dur := "-"
		if !r.ended.IsZero() {
			dur = r.ended.Sub(r.started).Round(time.Millisecond).String()
		}
		task := clean(r.task)
		if r.attempt > 1 {
			task = fmt.Sprintf("%s#%d", task, r.attempt)
		}
		tool, state := clean(r.server)+"/"+clean(r.tool), r.state
		if r.state == "skipped" {
			tool, state = "-", "skipped: "+r.reason
		}
		rows = append(rows, []string{task, tool, state, dur, fmt.Sprintf("%d/%d", r.generation, r.reconnects)})
	}
	width := make([]int, len(rows[0]))
	for _, cells := range rows {
		for i, c := range cells {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for n, cells := range rows {
		var b strings.Builder
		for i, c := range cells {
			pad := ""
			if i < len(cells)-1 {
				pad = strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)+2)
			}
			if i == 2 && n > 0 { // padded outside the colour codes
				c = p.paint(c)
			}
			b.WriteString(c + pad)
		}
		fmt.Fprintln(p.w, b.String())
	}
}

// paint colours a state word when colour is on: green for success, red
// for failure, yellow for states that need attention.
func (p *progress) paint(word string) string {
	if !p.color {
		return word
	}
	code := ""
	switch word {
	case "succeeded":
		code = "32"
	case "failed":
		code = "31"
	case "uncertain", "cancelled", "reconnecting", "redispatched", "skipped":
		code = "33"
	default:
		return word
	}
	return "\x1b[" + code + "m" + word + "\x1b[0m"
}

func terminal(state string) bool {
	switch state {
	case "succeeded", "failed", "uncertain", "cancelled":
		return true
	}
	return false
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// clean is termtext.Line, the one sanitizer for text printed to a human.
func clean(s string) string { return termtext.Line(s) }

// humanValue prints strings bare and everything else as compact JSON.
func humanValue(v any) string {
	if s, ok := v.(string); ok {
		return clean(s)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return clean(string(b))
}

// writeField prints "name: value" for a human: a one-line value after the
// name, a string of several lines (LF or CRLF) under it, each line
// indented by indent+"  " and sanitised on its own (tabs kept), so that a
// newline in an output is a line break, never a U+FFFD.
func writeField(w io.Writer, indent, name string, v any) {
	s, ok := v.(string)
	if !ok || !strings.Contains(s, "\n") {
		fmt.Fprintf(w, "%s%s: %s\n", indent, clean(name), humanValue(v))
		return
	}
	fmt.Fprintf(w, "%s%s:\n", indent, clean(name))
	s = strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for _, l := range strings.Split(s, "\n") {
		fmt.Fprintf(w, "%s  %s\n", indent, termtext.Block(l))
	}
}

// taskStatus shows an MCP task's acceptance and each status change:
// "task <digest> <status>: <message> (poll n)".
func (p *progress) taskStatus(e events.Event) {
	var effectID, status, message, ref string
	poll := 0
	if e.Type == vocab.TypeCallTaskAccepted {
		a, err := vocab.Decode[vocab.CallTaskAccepted](e)
		if err != nil {
			return
		}
		effectID, status, message, ref = a.EffectID, "accepted ("+a.Status+")", a.StatusMessage, a.TaskIDDigest
		p.mcpTasks[a.EffectID] = a.TaskIDDigest
	} else {
		s, err := vocab.Decode[vocab.CallTaskStatus](e)
		if err != nil {
			return
		}
		effectID, status, message, poll, ref = s.EffectID, s.Status, s.StatusMessage, s.Poll, p.mcpTasks[s.EffectID]
	}
	if len(ref) > 19 {
		ref = ref[:19] // "sha256:" and 12 hex digits
	}
	line := fmt.Sprintf("  call %s task %s %s", short(effectID), ref, clean(status))
	if message != "" {
		line += ": " + clean(message)
	}
	if poll > 0 {
		line += fmt.Sprintf(" (poll %d)", poll)
	}
	p.line("%s", line)
}
