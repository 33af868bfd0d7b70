package workflow

import (
	"context"
	"encoding/json"

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
