// Package replaytest checks replays in tests: it replays a run with the
// network blocked and no secrets, and normalises inspect documents so that a
// replay's compares equal to its source's.
package replaytest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
)

// BlockNetwork makes any HTTP use through the default transport fail the
// test, and listens on the stopped server's port so that a dial fails it too.
func BlockNetwork(t testing.TB, serverURL string) {
	t.Helper()
	old := http.DefaultTransport
	http.DefaultTransport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		t.Errorf("replay used the network: %s %s", r.Method, r.URL)
		return nil, errors.New("network forbidden in replay")
	})
	t.Cleanup(func() { http.DefaultTransport = old })
	u, err := url.Parse(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", u.Host)
	if err != nil {
		t.Fatalf("re-listen on the stopped server's address %s: %v", u.Host, err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Errorf("replay dialled %s", u.Host)
			_ = c.Close()
		}
	}()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Replay replays runID with the network blocked and no secrets.
func Replay(t testing.TB, db *events.DB, runID string) *workflow.Result {
	t.Helper()
	rp, err := replay.Prepare(context.Background(), db, runID)
	if err != nil {
		t.Fatalf("prepare replay of %s: %v", runID, err)
	}
	r := &workflow.Runner{DB: db, Dialer: rp.Dialer, Getenv: func(name string) string {
		t.Errorf("replay read the environment variable %s", name)
		return ""
	}}
	res, err := r.Run(context.Background(), rp.Workflow, rp.Inputs, workflow.RunOptions{Mode: "replay", SourceRunID: runID})
	if err != nil {
		t.Fatalf("replay of %s: %v", runID, err)
	}
	if !strings.HasPrefix(res.RunID, "replay-") {
		t.Fatalf("replay run id %q lacks the replay- prefix", res.RunID)
	}
	if u := rp.Dialer.Unused(); len(u) != 0 {
		t.Fatalf("replay left recorded calls unasked: %v", u)
	}
	return res
}

var progressToken = regexp.MustCompile(`"progressToken": "[0-9a-f]{16}"`)

// NormalInspect is the inspect document without what a replay may change:
// ids, timestamps, source links, the run mode and the row status (a replay's
// rows say "recorded"; the call's state machine state stays in protocolState).
func NormalInspect(t testing.TB, db *events.DB, runID string) (string, *projector.Document) {
	t.Helper()
	doc, err := projector.Inspect(context.Background(), db, runID)
	if err != nil {
		t.Fatalf("inspect %s: %v", runID, err)
	}
	raw, _ := json.Marshal(doc)
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	// A replay references the source's frames instead of copying them; the
	// frames it shows are the source's, seqs included, and its event count
	// counts them as its own.
	drop := map[string]bool{"runId": true, "effectId": true, "sourceRunId": true, "sourceEffectId": true, "sourceTaskId": true,
		"startedAt": true, "finishedAt": true, "updatedAt": true, "createdAt": true, "at": true, "mode": true, "status": true}
	var walk func(any) any
	walk = func(x any) any {
		switch x := x.(type) {
		case map[string]any:
			for k, v := range x {
				if drop[k] {
					delete(x, k)
					continue
				}
				x[k] = walk(v)
			}
		case []any:
			for i := range x {
				x[i] = walk(x[i])
			}
		}
		return x
	}
	out, _ := json.MarshalIndent(walk(v), "", " ")
	text := strings.ReplaceAll(string(out), runID, "<run>")
	for i, c := range doc.ProtocolCalls {
		text = strings.ReplaceAll(text, c.EffectID, fmt.Sprintf("<effect-%d>", i))
		// A replay's uncertain call is settled in its source: its message
		// names the source's call and run, as the source's own does.
		if c.SourceEffectID != nil {
			text = strings.ReplaceAll(text, *c.SourceEffectID, fmt.Sprintf("<effect-%d>", i))
		}
	}
	if doc.Run.SourceRunID != nil {
		text = strings.ReplaceAll(text, *doc.Run.SourceRunID, "<run>")
	}
	// Copied frames carry the progress token the original run sent.
	text = progressToken.ReplaceAllString(text, `"progressToken": "<token>"`)
	return text, doc
}

// InspectDoc is the inspect document of runID.
func InspectDoc(t testing.TB, db *events.DB, runID string) *projector.Document {
	t.Helper()
	doc, err := projector.Inspect(context.Background(), db, runID)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}
