package workflow_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/connstate"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
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

// TestRun_LeavesNoConnectionOpen: a run that dialed its own server client
// (no SessionPool) closes that client's connections with its sessions, so
// that a program running many runs (the Go API, a worker without a pool)
// does not keep each run's idle connections, and their goroutines, for the
// transport's idle timeout. The server sees every connection it accepted
// closed once the run of 4 concurrent tasks returned; with a pool the
// connections stay, for the next run, until the pool closes.
func TestRun_LeavesNoConnectionOpen(t *testing.T) {
	for _, pooled := range []bool{false, true} {
		t.Run(map[bool]string{false: "own client", true: "pool"}[pooled], func(t *testing.T) {
			var conns connstate.Counter
			_, url := demotest.StartCounted(t, demoserver.Options{}, &conns)
			wf, err := spec.Parse("four.yaml", []byte(chains(url, 4, 2, "echo", "{message: m}")))
			if err != nil {
				t.Fatal(err)
			}
			db := testkit.OpenDB(t, t.TempDir()+"/a.db", events.Options{})
			runner := &workflow.Runner{DB: db}
			if pooled {
				runner.Sessions = workflow.NewSessionPool()
			}
			res, err := runner.Run(context.Background(), wf, nil, workflow.RunOptions{})
			if err != nil || res.Err != nil {
				t.Fatalf("run: %v %v", err, res.Err)
			}
			n, still := conns.Counts()
			if n == 0 {
				t.Fatal("the server accepted no connection")
			}
			if pooled {
				if still == 0 {
					t.Fatal("the pool's session lost its connections when the run ended")
				}
				runner.Sessions.Close()
			}
			conns.WaitClosed(t, fmt.Sprintf("the server once the run (pooled %v) ended", pooled), 10*time.Second)
		})
	}
}
