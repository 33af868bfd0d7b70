package report

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/projector"
)

// Marker kinds on a call, in the order the legend lists them.
const (
	MarkSent       = "sent"       // the tools/call request went out
	MarkProgress   = "progress"   // notifications/progress (aggregated)
	MarkPoll       = "poll"       // tasks/get polls of an MCP task (aggregated)
	MarkResumed    = "resumed"    // the response stream was resumed (GET + Last-Event-ID)
	MarkLost       = "lost"       // the call's session was lost: its request met an expired session, or it went reconnecting
	MarkRedispatch = "redispatch" // the call was sent again on a fresh session
	MarkResult     = "result"     // a complete, validated result was recorded
	MarkError      = "error"      // a call.error was recorded
	MarkReplayed   = "replayed"   // recorded frames a replay answered with (aggregated)
)

// errSessionExpired is the call.error kind of a request answered 404 on
// its session (the transport's KindSessionExpired).
const errSessionExpired = "session_expired"

// maxPoints bounds the single markers kept per kind per call; the count
// goes on past it, so a pathological log cannot grow the report.
const maxPoints = 16

// maxTools bounds the tools listed per session.
const maxTools = 64

// Mark is what happened to a call of one kind: every occurrence is counted,
// the first maxPoints are kept as points in time.
type Mark struct {
	Kind   string
	Count  int
	Points []time.Time
	First  time.Time
	Last   time.Time
}

// Transition is one call.transition with its time.
type Transition struct {
	vocab.CallTransition

	Seq int64
	At  time.Time
}

// Call is one tools/call as the timeline draws it.
type Call struct {
	EffectID    string
	TaskID      string
	Attempt     int
	Server      string
	Tool        string
	Idempotency string
	Start, End  time.Time
	Status      string
	Transitions []Transition
	Marks       map[string]*Mark
	Errors      []vocab.CallError
	// Row is the protocol_calls row inspect read (nil when the projection
	// lags the log, in a live run).
	Row *projector.CallView
	// Reconcile holds the commands that settle the call when it is
	// uncertain and not yet reconciled.
	Reconcile []string
	// Budget is the redispatches the call's class allows (nil: not known).
	Budget *int
	// Reconciled is the operator's verdict, when given.
	Reconciled *projector.EffectView

	gen     int // the session generation of the call's last transition
	lostGen int // the generation whose loss is marked on the call (0: none)
}

// Attempt is one task attempt: a bar on its task's lane.
type Attempt struct {
	Attempt    int
	Server     string
	Tool       string
	Start, End time.Time
	Finished   bool
	State      string
	Error      string
	Calls      []*Call
}

// LaneMark is something that happened on a task's lane besides its calls: a
// retry scheduled, the task skipped, a session it opened.
type LaneMark struct {
	Kind   string // "skipped", "retry" or "session" (a session this task opened)
	At     time.Time
	Detail string
}

// Lane is one task of the run.
type Lane struct {
	TaskID   string
	Attempts []*Attempt
	Marks    []LaneMark
}

// RunMark is a run-wide moment (the run resumed).
type RunMark struct {
	Kind   string
	At     time.Time
	Detail string
}

// Session is one protocol session with the tools it listed.
type Session struct {
	Remote          string
	Generation      int
	TaskID          string
	URL             string
	ProtocolVersion string
	SessionIDDigest string
	CatalogDigest   string
	Opened          time.Time
	Expired         *time.Time
	Attached        []string // tasks that used the session after the one that opened it
	Tools           []vocab.ToolInfo
	ToolCount       int
	Warnings        []string
	SourceRunID     string
	Row             *projector.SessionView
}

// fold reads the run's events once, in seq order, into the timeline.
type fold struct {
	first, last time.Time
	lanes       []*Lane
	laneOf      map[string]*Lane
	calls       []*Call
	callOf      map[string]*Call
	sessions    []*Session
	sessionOf   map[string]*Session
	runMarks    []RunMark
	chain       *chainCheck
	lastStamp   string
	lastAt      time.Time
	sourceRunID string
	states      projector.Calls // each call's machine, rebuilt from the facts
}

func newFold(runID string) *fold {
	return &fold{laneOf: map[string]*Lane{}, callOf: map[string]*Call{}, sessionOf: map[string]*Session{},
		chain: newChainCheck(runID), states: projector.Calls{}}
}

// taskRef is the part of a task event's payload the fold reads; it decodes
// the event types the timeline knows only by name as well.
type taskRef struct {
	TaskID  string `json:"taskId"`
	Attempt int    `json:"attempt"`
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	State   string `json:"state"`
	Error   string `json:"error"`
	Reason  string `json:"reason"`
}

// add folds one event. Every event goes to the chain check; a broken link
// is remembered (the report says so) and the fold goes on.
func (f *fold) add(e events.Event) error {
	f.chain.add(e)
	if e.CreatedAt != f.lastStamp { // events of one commit share their time
		at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
		if err != nil {
			return fmt.Errorf("created_at of seq %d: %w", e.Seq, err)
		}
		f.lastStamp, f.lastAt = e.CreatedAt, at
	}
	at := f.lastAt
	if f.first.IsZero() {
		f.first = at
	}
	if at.After(f.last) {
		f.last = at
	}
	if strings.HasPrefix(e.Type, vocab.FramePrefix) {
		return f.frame(e, at)
	}
	switch e.Type {
	case vocab.TypeTaskStarted, vocab.TypeTaskFinished, vocab.TypeTaskSkipped, vocab.TypeTaskRetry:
		t, err := vocab.Decode[taskRef](e)
		if err != nil {
			return err
		}
		f.task(e.Type, t, at)
		return nil
	case vocab.TypeRunResumed:
		r, err := vocab.Decode[vocab.RunResumed](e)
		if err != nil {
			return err
		}
		f.runMarks = append(f.runMarks, RunMark{Kind: "resumed", At: at, Detail: "resumed after " + r.PreviousState})
		return nil
	}
	if !strings.HasPrefix(e.Type, "call.") && !strings.HasPrefix(e.Type, "session.") && e.Type != vocab.TypeReplayFrames {
		return nil
	}
	p, err := vocab.Payload(e)
	if err != nil {
		return err
	}
	switch p := p.(type) {
	case vocab.CallPrepared:
		f.callPrepared(p, at)
	case vocab.CallTransition:
		// A log written before moves rode on facts; taken by f.moved below.
	case vocab.CallResult:
		f.callMark(p.EffectID, MarkResult, at)
		if c := f.callOf[p.EffectID]; c != nil {
			c.polled(p.Polls, time.Time{})
		}
	case vocab.CallTaskStatus:
		if c := f.callOf[p.EffectID]; c != nil {
			c.polled(p.Poll, at)
		}
	case vocab.CallError:
		f.callError(p, at)
	case vocab.ReplayFrames:
		if c := f.callOf[p.EffectID]; c != nil {
			m := c.mark(MarkReplayed, at)
			m.Count += int(p.Count) - 1
		}
		f.sourceRunID = p.SourceRunID
	default:
		f.session(e.Type, p, at)
	}
	return f.moved(e, p, at)
}

// callPrepared adds the call (and the session its task attaches to).
func (f *fold) callPrepared(p vocab.CallPrepared, at time.Time) {
	c := &Call{EffectID: p.EffectID, TaskID: p.TaskID, Attempt: p.Attempt, Server: p.Server, Tool: p.Tool,
		Idempotency: p.Idempotency, Start: at, End: at, Status: "prepared", Marks: map[string]*Mark{}}
	f.calls = append(f.calls, c)
	f.callOf[c.EffectID] = c
	f.states.Prepared(p)
	if a := f.attempt(p.TaskID, p.Attempt, at); a != nil {
		a.Calls = append(a.Calls, c)
	}
	if p.SessionFrom != "" {
		f.session(vocab.TypeSessionAttached, vocab.SessionRef{Remote: p.Server, Generation: p.Generation, TaskID: p.TaskID, FromTaskID: p.SessionFrom}, at)
	}
}

// callError marks an error on its call.
func (f *fold) callError(ce vocab.CallError, at time.Time) {
	c := f.callOf[ce.EffectID]
	if c == nil {
		return
	}
	c.mark(MarkError, at)
	if ce.Kind == errSessionExpired { // lost even when the call cannot be resent (it ends uncertain)
		c.lost(c.gen, at)
	}
	if len(c.Errors) < maxPoints {
		c.Errors = append(c.Errors, ce)
	}
}

// moved folds the call transition p records (a fact's move, or a
// call.transition of an older log), after what the fact itself says.
func (f *fold) moved(e events.Event, p any, at time.Time) error {
	t, ok, err := f.states.Fact(e, p)
	if !ok || err != nil {
		return err
	}
	c := f.callOf[t.EffectID]
	if c == nil {
		return nil
	}
	c.Transitions = append(c.Transitions, Transition{CallTransition: t, Seq: e.Seq, At: at})
	c.Status, c.End = t.To, at
	switch t.To {
	case "reconnecting":
		c.lost(c.gen, at) // the generation it was on, before this move
	case "redispatched":
		c.mark(MarkRedispatch, at)
	}
	if t.Generation > 0 {
		c.gen = t.Generation
	}
	return nil
}

// session folds the session events (and a call's attachment to one).
func (f *fold) session(typ string, p any, at time.Time) {
	switch s := p.(type) {
	case vocab.SessionOpened:
		ss := &Session{Remote: s.Remote, Generation: s.Generation, TaskID: s.TaskID, URL: s.URL, ProtocolVersion: s.ProtocolVersion,
			SessionIDDigest: s.SessionIDDigest, Opened: at, SourceRunID: s.SourceRunID}
		f.sessions = append(f.sessions, ss)
		f.sessionOf[sessionKey(s.Remote, s.Generation)] = ss
		if s.TaskID != "" {
			l := f.lane(s.TaskID)
			l.Marks = append(l.Marks, LaneMark{Kind: "session", At: at, Detail: fmt.Sprintf("session %s generation %d opened (%s)", s.Remote, s.Generation, s.ProtocolVersion)})
		}
	case vocab.SessionCatalog:
		if ss := f.sessionOf[sessionKey(s.Remote, s.Generation)]; ss != nil {
			ss.CatalogDigest, ss.ToolCount, ss.Warnings = s.CatalogDigest, len(s.Tools), s.Warnings
			ss.Tools = s.Tools[:min(len(s.Tools), maxTools)]
		}
	case vocab.SessionRef:
		ss := f.sessionOf[sessionKey(s.Remote, s.Generation)]
		if ss == nil {
			return
		}
		if typ == vocab.TypeSessionExpired {
			t := at
			ss.Expired = &t
		} else if typ == vocab.TypeSessionAttached && len(ss.Attached) < maxTools {
			ss.Attached = append(ss.Attached, s.TaskID)
		}
	}
}

// progressPrefix opens a progress notification frame as agentctl writes it.
const progressPrefix = `{"dir":"in","kind":"notification","method":"notifications/progress",`

// frame marks a protocol frame on its call; frames of a session (initialize,
// tools/list) are not drawn.
func (f *fold) frame(e events.Event, at time.Time) error {
	id, ok := strings.CutPrefix(e.Stream, "call/")
	if !ok {
		return nil
	}
	c := f.callOf[id]
	if c == nil {
		return nil
	}
	switch e.Type {
	case vocab.FramePrefix + "resume":
		c.mark(MarkResumed, at)
		return nil
	case vocab.FramePrefix + "request", vocab.FramePrefix + "notification":
	default:
		return nil
	}
	p, err := e.Plaintext()
	if err != nil {
		return err
	}
	// Progress is most of a long call's frames: read the common shape by
	// its prefix (frames are written dir, kind, method first), anything
	// else through the frame decoder.
	if strings.HasPrefix(p, progressPrefix) {
		c.mark(MarkProgress, at)
		return nil
	}
	h, err := vocab.DecodeFrameHeader(e)
	if err != nil {
		return err
	}
	switch {
	case h.Dir == "out" && h.Method == "tools/call":
		c.mark(MarkSent, at)
	case h.Dir == "out" && h.Method == "tasks/get":
		c.mark(MarkPoll, at)
	case h.Dir == "in" && h.Method == "notifications/progress":
		c.mark(MarkProgress, at)
	}
	return f.moved(e, h, at) // the request carries the move it makes
}

func (f *fold) task(typ string, t taskRef, at time.Time) {
	l := f.lane(t.TaskID)
	switch typ {
	case vocab.TypeTaskStarted:
		l.Attempts = append(l.Attempts, &Attempt{Attempt: t.Attempt, Server: t.Server, Tool: t.Tool, Start: at, End: at, State: "running"})
	case vocab.TypeTaskFinished:
		if a := f.attempt(t.TaskID, t.Attempt, at); a != nil {
			a.End, a.Finished, a.State, a.Error = at, true, t.State, t.Error
		}
	case vocab.TypeTaskSkipped:
		l.Marks = append(l.Marks, LaneMark{Kind: "skipped", At: at, Detail: firstOf(t.Reason, t.Error)})
	case vocab.TypeTaskRetry:
		l.Marks = append(l.Marks, LaneMark{Kind: "retry", At: at, Detail: firstOf(t.Reason, t.Error)})
	}
}

func (f *fold) lane(taskID string) *Lane {
	l := f.laneOf[taskID]
	if l == nil {
		l = &Lane{TaskID: taskID}
		f.lanes = append(f.lanes, l)
		f.laneOf[taskID] = l
	}
	return l
}

// attempt finds the attempt a call or finish belongs to, opening one when
// the log has none (a log that starts mid-attempt cannot, but a report
// should still draw what it finds).
func (f *fold) attempt(taskID string, n int, at time.Time) *Attempt {
	if taskID == "" {
		return nil
	}
	l := f.lane(taskID)
	for i := len(l.Attempts) - 1; i >= 0; i-- {
		if l.Attempts[i].Attempt == n {
			return l.Attempts[i]
		}
	}
	a := &Attempt{Attempt: n, Start: at, End: at, State: "running"}
	l.Attempts = append(l.Attempts, a)
	return a
}

func (f *fold) callMark(effectID, kind string, at time.Time) {
	if c := f.callOf[effectID]; c != nil {
		c.mark(kind, at)
	}
}

// mark counts one occurrence of kind at at.
func (c *Call) mark(kind string, at time.Time) *Mark {
	m := c.Marks[kind]
	if m == nil {
		m = &Mark{Kind: kind, First: at}
		c.Marks[kind] = m
	}
	m.Count++
	m.Last = at
	if len(m.Points) < maxPoints {
		m.Points = append(m.Points, at)
	}
	if at.After(c.End) {
		c.End = at
	}
	return m
}

// lost marks the loss of session generation gen under c, once per
// generation (the call's session_expired error and its move to
// reconnecting are one loss).
func (c *Call) lost(gen int, at time.Time) {
	if gen != 0 && gen == c.lostGen {
		return
	}
	c.lostGen = gen
	c.mark(MarkLost, at)
}

// polled raises c's task-poll count to n, the ordinal of a poll the log
// names (call.task_status) or the total a task's result carries: identical
// polls are folded out of the log, their frames not kept, so counting
// tasks/get frames alone would say too few. A zero at (the result's total)
// leaves the last poll's time as it was.
func (c *Call) polled(n int, at time.Time) {
	if n <= 0 {
		return
	}
	m := c.Marks[MarkPoll]
	if m == nil {
		if at.IsZero() {
			return // a total with no poll drawn: nothing to place on the timeline
		}
		m = c.mark(MarkPoll, at)
	}
	if !at.IsZero() && at.After(m.Last) {
		m.Last = at
	}
	m.Count = max(m.Count, n)
}

func sessionKey(remote string, gen int) string {
	b, _ := json.Marshal([]any{remote, gen})
	return string(b)
}

func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
