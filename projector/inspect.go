package projector

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
)

// Inspect bounds (docs/ARCHITECTURE.md, "The event log"): what inspect exposes is bounded, the log is not.
const (
	MaxStreamEventsPerAttempt = 256
	MaxPayloadBytes           = 4096
)

// TypeStreamTruncated is not an event of the log: it is the stream item
// inspect puts last when an attempt has more than MaxStreamEventsPerAttempt.
const TypeStreamTruncated = "stream.truncated"

// Document is what `agentctl inspect` prints; keys are camelCase and absent
// values are null.
type Document struct {
	Run              *RunView      `json:"run"`
	Tasks            []TaskView    `json:"tasks"`
	ProtocolSessions []SessionView `json:"protocolSessions"`
	ProtocolCalls    []CallView    `json:"protocolCalls"`
	StreamEvents     []StreamEvent `json:"streamEvents"`
	Effects          []EffectView  `json:"effects,omitempty"`
	// AuthSteps are the run's OAuth steps (auth.step events: no secret).
	AuthSteps []AuthStepView  `json:"authSteps,omitempty"`
	Outputs   json.RawMessage `json:"outputs"`
}

// AuthStepView is one auth.step event of a run, with its seq and time.
type AuthStepView struct {
	Seq int64  `json:"seq"`
	At  string `json:"at"`
	vocab.AuthStep
}

// RunView is the runs row.
type RunView struct {
	RunID          string  `db:"run_id" json:"runId"`
	Workflow       string  `db:"workflow" json:"workflow"`
	WorkflowDigest string  `db:"workflow_digest" json:"workflowDigest"`
	Mode           string  `db:"mode" json:"mode"`
	SourceRunID    *string `db:"source_run_id" json:"sourceRunId"`
	State          string  `db:"state" json:"state"`
	ExitCode       *int    `db:"exit_code" json:"exitCode"`
	Error          *string `db:"error" json:"error"`
	// Calls is the run's protocol_calls rows (one per call.prepared).
	Calls int `db:"calls" json:"calls"`
	// Events is the run's events, read from the log; in a replay, each
	// replay.frames event counts as the frames it references.
	Events     int64   `db:"-" json:"events"`
	StartedAt  string  `db:"started_at" json:"startedAt"`
	FinishedAt *string `db:"finished_at" json:"finishedAt"`
	// UpdatedAt is the time of the run's last event other than a frame.
	UpdatedAt string `db:"updated_at" json:"updatedAt"`
}

// TaskView is a tasks row.
type TaskView struct {
	RunID string `db:"run_id" json:"-"`
	// RowID orders a run's tasks as the log started them: the seq of the
	// event that inserted the row (migrations: SQLite 0020, PostgreSQL 0011).
	RowID      int64   `db:"rowid" json:"-"`
	TaskID     string  `db:"task_id" json:"taskId"`
	Attempt    int     `db:"attempt" json:"attempt"`
	Server     *string `db:"server" json:"server"`
	Tool       *string `db:"tool" json:"tool"`
	State      string  `db:"state" json:"state"`
	Error      *string `db:"error" json:"error"`
	StartedAt  string  `db:"started_at" json:"startedAt"`
	FinishedAt *string `db:"finished_at" json:"finishedAt"`
	UpdatedAt  string  `db:"updated_at" json:"updatedAt"`
}

// SessionView is a protocol_sessions row.
type SessionView struct {
	RunID string `db:"run_id" json:"runId"`
	// RowID is PostgreSQL's insertion order (SQLite's rowid is not selected by *).
	RowID      int64  `db:"rowid" json:"-"`
	TaskID     string `db:"task_id" json:"taskId"`
	Remote     string `db:"remote" json:"remote"`
	Generation int    `db:"generation" json:"generation"`
	URL        string `db:"url" json:"url"`
	// Transport is "stdio" for a child process (url "stdio:PROGRAM"), else "http".
	Transport       string          `db:"-" json:"transport"`
	Status          string          `db:"status" json:"status"`
	SessionIDDigest *string         `db:"session_id_digest" json:"sessionIdDigest"`
	ProtocolVersion *string         `db:"protocol_version" json:"protocolVersion"`
	ServerInfoRaw   *string         `db:"server_info" json:"-"`
	ServerInfo      json.RawMessage `db:"-" json:"serverInfo"`
	CatalogDigest   *string         `db:"catalog_digest" json:"catalogDigest"`
	SourceRunID     *string         `db:"source_run_id" json:"sourceRunId"`
	SourceTaskID    *string         `db:"source_task_id" json:"sourceTaskId"`
	CreatedAt       string          `db:"created_at" json:"createdAt"`
	UpdatedAt       string          `db:"updated_at" json:"updatedAt"`
}

// TransportOf names the transport of a session recorded with url: "stdio"
// for "stdio:PROGRAM", else "http".
func TransportOf(url string) string {
	if strings.HasPrefix(url, "stdio:") {
		return "stdio"
	}
	return "http"
}

// CallView is a protocol_calls row.
type CallView struct {
	EffectID string `db:"effect_id" json:"effectId"`
	// RowID is PostgreSQL's insertion order (SQLite's rowid is not selected by *).
	RowID           int64           `db:"rowid" json:"-"`
	RunID           string          `db:"run_id" json:"runId"`
	TaskID          string          `db:"task_id" json:"taskId"`
	Attempt         int             `db:"attempt" json:"attempt"`
	Operation       string          `db:"operation" json:"operation"`
	Server          string          `db:"server" json:"server"`
	Tool            string          `db:"tool" json:"tool"`
	Idempotency     string          `db:"idempotency" json:"idempotency"`
	Generation      int             `db:"generation" json:"generation"`
	Status          string          `db:"status" json:"status"`
	ArgumentsDigest string          `db:"arguments_digest" json:"argumentsDigest"`
	SchemaDigest    *string         `db:"schema_digest" json:"schemaDigest"`
	ResultDigest    *string         `db:"result_digest" json:"resultDigest"`
	Error           *string         `db:"error" json:"error"`
	ProtocolRaw     *string         `db:"protocol_state" json:"-"`
	ProtocolState   json.RawMessage `db:"-" json:"protocolState"`
	Redispatches    int             `db:"redispatches" json:"redispatches"`
	JSONRPCID       *string         `db:"json_rpc_id" json:"jsonRpcId"`
	SourceRunID     *string         `db:"source_run_id" json:"sourceRunId"`
	SourceEffectID  *string         `db:"source_effect_id" json:"sourceEffectId"`
	CreatedAt       string          `db:"created_at" json:"createdAt"`
	UpdatedAt       string          `db:"updated_at" json:"updatedAt"`
	// Task is the MCP task the call was made as; absent otherwise.
	Task *CallTaskView `db:"-" json:"task,omitempty"`
}

// EffectView is an effects row (a reconciliation).
type EffectView struct {
	EffectID     string  `db:"effect_id" json:"effectId"`
	RunID        string  `db:"run_id" json:"runId"`
	Status       string  `db:"status" json:"status"`
	Reason       string  `db:"reason" json:"reason"`
	ResultDigest *string `db:"result_digest" json:"resultDigest"`
	ReconciledAt string  `db:"reconciled_at" json:"reconciledAt"`
}

// StreamEvent is one protocol frame as inspect shows it (bounded).
type StreamEvent struct {
	Seq        int64           `json:"seq"`
	Type       string          `json:"type"`
	Stream     string          `json:"stream"`
	TaskID     *string         `json:"taskId"`
	Attempt    *int            `json:"attempt"`
	EffectID   *string         `json:"effectId"`
	Dir        string          `json:"dir"`
	Method     *string         `json:"method"`
	Remote     string          `json:"remote"`
	Generation int             `json:"generation"`
	At         string          `json:"at"`
	Payload    json.RawMessage `json:"payload"`
	// SourceRunID is set on a frame a replay references: Seq and At are
	// those of the run named here, which holds the frame.
	SourceRunID *string `json:"sourceRunId,omitempty"`
}

// ErrUnknownRun is returned for a run id with no events.
var ErrUnknownRun = errors.New("unknown run")

// Inspect builds the inspect document of runID from the projections and the log.
func Inspect(ctx context.Context, db *events.DB, runID string) (*Document, error) {
	return InspectEach(ctx, db, runID, nil)
}

// InspectEach is Inspect that also hands each, when not nil, every event of
// the run in seq order (with its hashes) from the one read of the log that
// Inspect makes, so that a view built beside the document (the HTML report's
// timeline and chain check) costs no second scan. An error from each stops
// the read and is returned.
func InspectEach(ctx context.Context, db *events.DB, runID string, each func(events.Event) error) (*Document, error) {
	x := db.SQL()
	var run RunView
	if err := x.GetContext(ctx, &run, `SELECT run_id, workflow, workflow_digest, mode, source_run_id, state, exit_code, error, started_at, finished_at,
		(SELECT COUNT(*) FROM protocol_calls c WHERE c.run_id = runs.run_id) AS calls,
		COALESCE((SELECT created_at FROM events e WHERE e.run_id = runs.run_id AND e.type NOT LIKE 'mcp.%' ORDER BY e.seq DESC LIMIT 1), updated_at) AS updated_at
		FROM runs WHERE run_id = ?`, runID); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("%w %q", ErrUnknownRun, runID)
		}
		return nil, &events.Error{Op: "inspect", Path: db.Path(), Err: err}
	}
	// The run row follows the last protocol step; frames after it (progress
	// of a call still running, or of a run that was killed) count too.
	if err := x.GetContext(ctx, &run.Events, `SELECT COALESCE(MAX(seq), 0) FROM events WHERE run_id = ?`, runID); err != nil {
		return nil, &events.Error{Op: "inspect", Path: db.Path(), Err: err}
	}
	doc := &Document{Run: &run, Tasks: []TaskView{}, ProtocolSessions: []SessionView{}, ProtocolCalls: []CallView{}, StreamEvents: []StreamEvent{}, Outputs: json.RawMessage("null")}
	if err := x.SelectContext(ctx, &doc.Tasks, `SELECT * FROM tasks WHERE run_id = ? ORDER BY rowid`, runID); err != nil {
		return nil, &events.Error{Op: "inspect tasks", Path: db.Path(), Err: err}
	}
	if err := x.SelectContext(ctx, &doc.ProtocolSessions, `SELECT * FROM protocol_sessions WHERE run_id = ? ORDER BY rowid`, runID); err != nil {
		return nil, &events.Error{Op: "inspect sessions", Path: db.Path(), Err: err}
	}
	for i := range doc.ProtocolSessions {
		doc.ProtocolSessions[i].ServerInfo = rawOrNull(doc.ProtocolSessions[i].ServerInfoRaw)
		doc.ProtocolSessions[i].Transport = TransportOf(doc.ProtocolSessions[i].URL)
	}
	if err := x.SelectContext(ctx, &doc.ProtocolCalls, `SELECT * FROM protocol_calls WHERE run_id = ? ORDER BY rowid`, runID); err != nil {
		return nil, &events.Error{Op: "inspect calls", Path: db.Path(), Err: err}
	}
	for i := range doc.ProtocolCalls {
		doc.ProtocolCalls[i].ProtocolState = rawOrNull(doc.ProtocolCalls[i].ProtocolRaw)
	}
	if err := x.SelectContext(ctx, &doc.Effects, `SELECT * FROM effects WHERE run_id = ? ORDER BY reconciled_at`, runID); err != nil {
		return nil, &events.Error{Op: "inspect effects", Path: db.Path(), Err: err}
	}
	perAttempt := map[string]int{}
	scan := db.ScanPayloads
	if each != nil {
		scan = func(ctx context.Context, runID string, fn func(events.Event) error) error {
			return db.Scan(ctx, runID, 0, func(e events.Event) error {
				if err := each(e); err != nil {
					return err
				}
				return fn(e)
			})
		}
	}
	tasks := taskViews{}
	var sealed unsealer // columns the projector kept sealed (sealed.go)
	err := scan(ctx, runID, func(e events.Event) error {
		if err := tasks.add(e); err != nil {
			return err
		}
		if err := sealed.add(e); err != nil {
			return err
		}
		if e.Type == vocab.TypeRunFinished {
			if p, err := vocab.Decode[vocab.RunFinished](e); err == nil && p.Outputs != nil {
				doc.Outputs, _ = json.Marshal(p.Outputs)
			}
		}
		if e.Type == vocab.TypeReplayFrames {
			return replayedFrames(ctx, db, e, perAttempt, doc)
		}
		if e.Type == vocab.TypeAuthStep {
			return doc.addAuthStep(e)
		}
		if !strings.HasPrefix(e.Type, vocab.FramePrefix) {
			return nil
		}
		// Past the bound only the attempt is needed: decode just that
		// (the payload is still checked whole), and the frame when shown.
		k, err := vocab.DecodeFrameKey(e)
		if err != nil {
			return err
		}
		return addFrame(e, k.TaskID+"/"+strconv.Itoa(k.Attempt), perAttempt, doc, nil)
	})
	if err != nil {
		return nil, err
	}
	tasks.finish()
	sealed.patch(doc)
	for i := range doc.ProtocolCalls {
		doc.ProtocolCalls[i].Task = tasks[doc.ProtocolCalls[i].EffectID]
	}
	// Fill in how many frames each truncation marker stands for.
	for i, se := range doc.StreamEvents {
		if se.Type != TypeStreamTruncated {
			continue
		}
		key := deref(se.TaskID) + "/" + strconv.Itoa(derefInt(se.Attempt))
		dropped := perAttempt[key] - (MaxStreamEventsPerAttempt - 1)
		doc.StreamEvents[i].Payload, _ = json.Marshal(map[string]int{"dropped": dropped})
	}
	return doc, nil
}

// addFrame counts frame e against its attempt's bound and shows it (or
// the truncation marker) while under the bound. ref, when set, is the
// replay.frames event that e (an event of ref's source run) stands in.
func addFrame(e events.Event, key string, perAttempt map[string]int, doc *Document, ref *referenced) error {
	n := perAttempt[key]
	perAttempt[key] = n + 1
	if n >= MaxStreamEventsPerAttempt {
		return nil
	}
	f, err := vocab.DecodeFrame(e)
	if err != nil {
		return err
	}
	var se StreamEvent
	if n < MaxStreamEventsPerAttempt-1 {
		se = streamEvent(e, f)
	} else {
		se = StreamEvent{Seq: e.Seq, Type: TypeStreamTruncated, Stream: e.Stream, TaskID: strPtr(f.TaskID), Attempt: intPtr(f.Attempt), Remote: f.Remote, Generation: f.Generation, At: e.CreatedAt}
	}
	if ref != nil {
		se.Stream, se.SourceRunID = ref.stream, &ref.SourceRunID
		if se.Type != TypeStreamTruncated {
			se.EffectID = strPtr(ref.EffectID)
		}
	}
	doc.StreamEvents = append(doc.StreamEvents, se)
	return nil
}

// referenced is a replay.frames event being expanded by inspect.
type referenced struct {
	vocab.ReplayFrames

	stream string
}

// replayedFrames shows the frames a replay run references as if they were
// its own (inspect of a replay equals the source's): read from the run that
// holds them while under the attempt's bound, counted from the spans past it.
func replayedFrames(ctx context.Context, db *events.DB, e events.Event, perAttempt map[string]int, doc *Document) error {
	rf, err := vocab.Decode[vocab.ReplayFrames](e)
	if err != nil {
		return err
	}
	ref := &referenced{ReplayFrames: rf, stream: e.Stream}
	// The run's event count counts the referenced frames in place of the
	// reference, as if they had been copied: a replay's inspect equals its
	// source's (issue 5), and the count says how much evidence the run has.
	doc.Run.Events += ref.Count - 1
	key := ref.TaskID + "/" + strconv.Itoa(ref.Attempt)
	for _, sp := range ref.Spans {
		from, to := sp[0], sp[1]
		if to < from {
			return fmt.Errorf("replay.frames at seq %d: span %d-%d", e.Seq, from, to)
		}
		if left := int64(MaxStreamEventsPerAttempt - perAttempt[key]); left > 0 {
			last := min(to, from+left-1)
			read := int64(0)
			err := db.ScanRange(ctx, ref.SourceRunID, from, last, func(se events.Event) error {
				if !strings.HasPrefix(se.Type, vocab.FramePrefix) {
					return fmt.Errorf("replay.frames at seq %d: seq %d of run %s is %s, not a frame", e.Seq, se.Seq, ref.SourceRunID, se.Type)
				}
				read++
				return addFrame(se, key, perAttempt, doc, ref)
			})
			if err != nil {
				return err
			}
			if read != last-from+1 {
				return fmt.Errorf("replay.frames at seq %d: run %s lacks seqs %d-%d", e.Seq, ref.SourceRunID, from, last)
			}
			from = last + 1
		}
		perAttempt[key] += int(to - from + 1)
	}
	return nil
}

func streamEvent(e events.Event, f vocab.Frame) StreamEvent {
	se := StreamEvent{Seq: e.Seq, Type: e.Type, Stream: e.Stream, Dir: f.Dir, Remote: f.Remote, Generation: f.Generation, At: e.CreatedAt,
		TaskID: strPtr(f.TaskID), EffectID: strPtr(f.EffectID), Method: strPtr(f.Method)}
	if f.Attempt > 0 {
		se.Attempt = intPtr(f.Attempt)
	}
	se.Payload = BoundPayload(f.Body)
	return se
}

// BoundPayload returns p, or {truncated, originalBytes, sha256} when p is over 4 KiB.
func BoundPayload(p json.RawMessage) json.RawMessage {
	if len(p) == 0 {
		return json.RawMessage("null")
	}
	if len(p) <= MaxPayloadBytes {
		return p
	}
	sum := sha256.Sum256(p)
	out, _ := json.Marshal(map[string]any{"truncated": true, "originalBytes": len(p), "sha256": hex.EncodeToString(sum[:])})
	return out
}

func rawOrNull(s *string) json.RawMessage {
	if s == nil || *s == "" {
		return json.RawMessage("null")
	}
	return json.RawMessage(*s)
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func intPtr(i int) *int { return &i }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func derefInt(i *int) int {
	if i == nil {
		return 0
	}
	return *i
}

// addAuthStep adds an auth.step event to the document's auth steps.
func (doc *Document) addAuthStep(e events.Event) error {
	p, err := vocab.Decode[vocab.AuthStep](e)
	if err != nil {
		return err
	}
	doc.AuthSteps = append(doc.AuthSteps, AuthStepView{Seq: e.Seq, At: e.CreatedAt, AuthStep: p})
	return nil
}
