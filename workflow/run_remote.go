package workflow

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentctl/agentctl/transport"
)

// Dialer opens connections to remotes. The run loop uses the network
// dialer; replay uses one that answers from a recorded run.
type Dialer interface {
	Dial(remote string, cfg transport.Config) (Conn, error)
}

// Conn is one remote; each Connect opens a new session (a new generation).
type Conn interface {
	Connect(ctx context.Context, sink transport.Sink) (Session, error)
}

// Session is one initialized MCP session as the run loop needs it.
type Session interface {
	Info() SessionInfo
	ListTools(ctx context.Context, sink transport.Sink) (*transport.Catalog, error)
	CallTool(ctx context.Context, req transport.CallRequest, sink transport.Sink) (*transport.CallResult, error)
	Close(ctx context.Context) error
}

// TaskSession is implemented by sessions that speak MCP tasks (network
// sessions; a replay session of a run that used none does not): the run
// loop uses a task only through it.
type TaskSession interface {
	// ToolCallTasks: initialize advertised task-augmented tools/call.
	ToolCallTasks() bool
	// ToolsChanged: notifications/tools/list_changed arrived since the
	// last tools/list.
	ToolsChanged() bool
	// SessionID is the raw MCP-Session-Id (persisted sealed, to reattach).
	SessionID() string
	CallToolTask(ctx context.Context, req transport.CallRequest, ttl time.Duration, sink transport.Sink) (*transport.TaskCall, error)
	PollTask(ctx context.Context, t *transport.Task, sink transport.Sink, observe func(*transport.Task) error) (*transport.Task, error)
	GetTask(ctx context.Context, taskID string, sink transport.Sink) (*transport.Task, error)
	TaskResult(ctx context.Context, taskID string, sink transport.Sink) (*transport.CallResult, error)
	CancelTask(ctx context.Context, taskID string, sink transport.Sink) (*transport.Task, error)
}

// Reattacher is a Conn that can bind a recorded MCP session id without a
// new initialize, to poll a task after a restart.
type Reattacher interface {
	Reattach(sessionID string) (Session, error)
}

// Recorded is implemented by sessions that answer from a recorded run
// (replay): the run loop copies their source links into what it records.
type Recorded interface {
	// SourceRunID is the run whose evidence answers.
	SourceRunID() string
	// SourceTaskID is the task of the source run that opened this session.
	SourceTaskID() string
	// Expect tells the session which call the run loop prepares next
	// (task attempt and ordinal): the next CallTool must match the recorded
	// call there. It returns that call's effect id, "" if none was recorded.
	Expect(taskID string, attempt, ordinal int) string
}

// SessionInfo is what initialize established.
type SessionInfo struct {
	ProtocolVersion string
	ServerInfo      json.RawMessage
	IDDigest        string
}

// NetworkDialer dials real servers through package transport.
type NetworkDialer struct{}

// Dial builds a transport client; the policy is checked here, before any byte is sent.
func (NetworkDialer) Dial(_ string, cfg transport.Config) (Conn, error) {
	c, err := transport.New(cfg)
	if err != nil {
		return nil, err
	}
	return netConn{c}, nil
}

type netConn struct{ c *transport.Client }

func (n netConn) Connect(ctx context.Context, sink transport.Sink) (Session, error) {
	s, err := n.c.Connect(ctx, sink)
	if err != nil {
		return nil, err
	}
	return netSession{s}, nil
}

type netSession struct{ s *transport.Session }

func (n netSession) Info() SessionInfo {
	return SessionInfo{ProtocolVersion: n.s.ProtocolVersion, ServerInfo: n.s.ServerInfo, IDDigest: n.s.IDDigest()}
}

func (n netSession) ListTools(ctx context.Context, sink transport.Sink) (*transport.Catalog, error) {
	return n.s.ListTools(ctx, sink)
}

func (n netSession) CallTool(ctx context.Context, req transport.CallRequest, sink transport.Sink) (*transport.CallResult, error) {
	return n.s.CallTool(ctx, req, sink)
}

func (n netSession) Close(ctx context.Context) error { return n.s.Close(ctx) }

// closeRecorder is a session whose end is recorded (a stdio server's
// process_exit) with the sink the caller gives at close.
type closeRecorder interface {
	CloseWith(ctx context.Context, sink transport.Sink) error
}

func (n netSession) CloseWith(ctx context.Context, sink transport.Sink) error {
	return n.s.CloseWith(ctx, sink)
}

// silentCloser is a session whose close records nothing (HTTP), so the
// run may close it while its last commit is made (closeSessions).
type silentCloser interface {
	ClosesSilently() bool
}

func (n netSession) ClosesSilently() bool { return n.s.ClosesSilently() }

func (n netConn) Reattach(sessionID string) (Session, error) {
	s, err := n.c.Reattach(sessionID)
	if err != nil {
		return nil, err
	}
	return netSession{s}, nil
}

func (n netSession) ToolCallTasks() bool { return n.s.ToolCallTasks() }
func (n netSession) ToolsChanged() bool  { return n.s.ToolsChanged() }
func (n netSession) SessionID() string   { return n.s.SessionID() }

func (n netSession) CallToolTask(ctx context.Context, req transport.CallRequest, ttl time.Duration, sink transport.Sink) (*transport.TaskCall, error) {
	return n.s.CallToolTask(ctx, req, ttl, sink)
}

func (n netSession) PollTask(ctx context.Context, t *transport.Task, sink transport.Sink, observe func(*transport.Task) error) (*transport.Task, error) {
	return n.s.PollTask(ctx, t, sink, observe)
}

func (n netSession) GetTask(ctx context.Context, taskID string, sink transport.Sink) (*transport.Task, error) {
	return n.s.GetTask(ctx, taskID, sink)
}

func (n netSession) TaskResult(ctx context.Context, taskID string, sink transport.Sink) (*transport.CallResult, error) {
	return n.s.TaskResult(ctx, taskID, sink)
}

func (n netSession) CancelTask(ctx context.Context, taskID string, sink transport.Sink) (*transport.Task, error) {
	return n.s.CancelTask(ctx, taskID, sink)
}
