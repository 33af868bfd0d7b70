package transport

import (
	"context"
	"testing"

	"github.com/agentctl/agentctl/transport/mcptest"
)

// TestDrain_OneConnectionForSequentialCalls: each call's response stream
// is read to its end, so net/http reuses the connection; closing it as
// soon as the response was parsed made about a third of the calls open a
// new one (drain.go).
func TestDrain_OneConnectionForSequentialCalls(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("echo"))
	c := newClient(t, srv.URL, nil)
	s := connect(t, c, nil)
	conns := srv.Stats().Conns
	const calls = 50
	for i := range calls {
		res, err := s.CallTool(context.Background(), CallRequest{Tool: "echo"}, nil)
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i+1, err, res)
		}
	}
	if got := srv.Stats().Conns - conns; got != 0 {
		t.Errorf("%d sequential calls opened %d new connections, want 0 (the session's connection is reused)", calls, got)
	}
	if c.noDrain.Load() {
		t.Error("noDrain set against a server that ends every stream after its response")
	}
}

// TestDrain_ServerKeepsStreamOpen: a server that leaves a stream open
// after its response costs one bounded wait: the call returns its result,
// the stream is closed by the client, and the client stops waiting for
// the ends of its later streams.
func TestDrain_ServerKeepsStreamOpen(t *testing.T) {
	srv := mcptest.Start(t, mcptest.Options{}, okTool("echo"))
	srv.Inject(mcptest.Fault{RPCMethod: "tools/call", Nth: 1, HoldAfterResponse: true})
	c := newClient(t, srv.URL, nil)
	s := connect(t, c, nil)
	for i := range 3 {
		res, err := s.CallTool(context.Background(), CallRequest{Tool: "echo"}, nil)
		if err != nil || res.IsError {
			t.Fatalf("call %d: %v %+v", i+1, err, res)
		}
	}
	if !c.noDrain.Load() {
		t.Error("noDrain not set after a stream stayed open past its response")
	}
	if st := srv.Stats(); st.Executed["echo"] != 3 {
		t.Errorf("server executed echo %d times, want 3", st.Executed["echo"])
	}
}
