package workflow_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/spec"
)

// TestRun_ReturnsWithHTTPSessionsClosed: a run closes its HTTP session
// (one DELETE, recorded nowhere) while it commits run.finished, and still
// returns only once the server has answered that DELETE: here the server
// takes 100 ms over it, so a run that did not wait would return first.
func TestRun_ReturnsWithHTTPSessionsClosed(t *testing.T) {
	s := demoserver.New(demoserver.Options{})
	h := s.Handler()
	var deletes, answered atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
			time.Sleep(100 * time.Millisecond) // a slow server, not a synchronisation
			defer answered.Add(1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		for ss := range s.MCPServer().Sessions() {
			_ = ss.Close()
		}
		hs.CloseClientConnections()
		hs.Close()
	})
	wf, err := spec.Parse("two.yaml", []byte(manyCalls(hs.URL+"/mcp", 2)))
	if err != nil {
		t.Fatal(err)
	}
	db := testkit.OpenDB(t, t.TempDir()+"/a.db", events.Options{})
	res, err := (&workflow.Runner{DB: db}).Run(context.Background(), wf, nil, workflow.RunOptions{})
	if err != nil || res.Err != nil {
		t.Fatalf("run: %v %v", err, res.Err)
	}
	if d, a := deletes.Load(), answered.Load(); d != 1 || a != 1 {
		t.Fatalf("when the run returned the server had %d DELETE requests, %d answered; want 1 and 1", d, a)
	}
}
