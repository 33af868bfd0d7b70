package transport

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// newClient returns a client for srv allowing loopback http.
func newClient(t *testing.T, url string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{URL: url, Policy: localPolicy(), Timeout: 10 * time.Second, MaxResumeDelay: -1}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New(%q): %v", url, err)
	}
	return c
}

func connect(t *testing.T, c *Client, sink Sink) *Session {
	t.Helper()
	s, err := c.Connect(context.Background(), sink)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T) is not a *transport.Error", err, err)
	}
	return e
}

func wantKind(t *testing.T, err error, k Kind) *Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want kind %s", k)
	}
	e := asError(t, err)
	if e.Kind != k {
		t.Fatalf("kind = %s, want %s (error: %v)", e.Kind, k, err)
	}
	return e
}

func okTool(name string) mcptest.ToolDef {
	return mcptest.ToolDef{Name: name, Description: "returns ok",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)}
}
