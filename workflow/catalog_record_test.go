package workflow_test

import (
	"context"
	"slices"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/internal/demoserver"
	"github.com/agentctl/agentctl/internal/demoserver/demotest"
	"github.com/agentctl/agentctl/internal/testkit"
	"github.com/agentctl/agentctl/projector"
	"github.com/agentctl/agentctl/transport"
	"github.com/agentctl/agentctl/workflow"
	"github.com/agentctl/agentctl/workflow/replay"
	"github.com/agentctl/agentctl/workflow/spec"
)

// payloadsOf is the payloads of runID's events of type typ, in order.
func payloadsOf[P any](t *testing.T, db *events.DB, runID, typ string) []P {
	t.Helper()
	evs, err := db.Events(context.Background(), runID)
	if err != nil {
		t.Fatal(err)
	}
	var out []P
	for _, e := range evs {
		if e.Type == typ {
			p, err := vocab.Decode[P](e)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, p)
		}
	}
	return out
}

// catalogsOf is the session.catalog payloads of runID, in order.
func catalogsOf(t *testing.T, db *events.DB, runID string) []vocab.SessionCatalog {
	t.Helper()
	return payloadsOf[vocab.SessionCatalog](t, db, runID, vocab.TypeSessionCatalog)
}

// TestCatalogRecord_CallableToolsWhole: against the demo server (seven
// tools), a run whose one task calls echo records session.catalog with
// every tool by name, title, description and digest, and the schemas of
// echo alone, both on a session of its own and on one borrowed from a
// pool; a listing run (`mcp tools`) records every tool whole. The catalog
// digest recomputed from each record's tool digests is the listed
// catalog's, and each run verifies and replays from its own log to success.
func TestCatalogRecord_CallableToolsWhole(t *testing.T) {
	testkit.EachBackend(t, func(t *testing.T, b testkit.Backend) {
		ctx := context.Background()
		_, url := demotest.StartTest(t, demoserver.Options{})
		db := b.Open(t, events.Options{})
		wf, err := spec.Parse("one.yaml", []byte(testkit.Workflow{Name: "one", URL: url, Tasks: []testkit.Task{
			{ID: "t1", Action: "act", Idempotency: "idempotent", Tool: "echo", Arguments: "{message: m}"}}}.YAML()))
		if err != nil {
			t.Fatal(err)
		}
		list, cat, err := (&workflow.Runner{DB: db}).ListTools(ctx, wf, "local")
		if err != nil || list.Err != nil {
			t.Fatalf("list tools: %v %v", err, list.Err)
		}
		if len(cat.Tools) < 3 {
			t.Fatalf("the demo server lists %d tools; the test needs tools the run does not call", len(cat.Tools))
		}
		listed := catalogsOf(t, db, list.RunID)
		if len(listed) != 1 || listed[0].CatalogDigest != cat.Digest() {
			t.Fatalf("listing run's catalogs %+v, want one with digest %s", listed, cat.Digest())
		}
		for _, ti := range listed[0].Tools {
			if len(ti.InputSchema) == 0 {
				t.Fatalf("listing run recorded tool %q without its inputSchema", ti.Name)
			}
		}

		pool := workflow.NewSessionPool()
		defer pool.Close()
		var runs []string
		for _, r := range []*workflow.Runner{{DB: db}, {DB: db, Sessions: pool}, {DB: db, Sessions: pool}} {
			res, err := r.Run(ctx, wf, nil, workflow.RunOptions{})
			if err != nil || res.Err != nil || res.State != workflow.StateSucceeded {
				t.Fatalf("run: %v %v", err, res)
			}
			runs = append(runs, res.RunID)
		}
		if ss := payloadsOf[vocab.SessionOpened](t, db, runs[2], vocab.TypeSessionOpened); len(ss) != 1 || ss[0].BorrowedFrom == nil {
			t.Fatalf("the third run's sessions %+v, want one borrowed from the pool", ss)
		}
		for _, id := range runs {
			cs := catalogsOf(t, db, id)
			if len(cs) != 1 {
				t.Fatalf("run %s recorded %d catalogs, want 1", id, len(cs))
			}
			c := cs[0]
			if c.CatalogDigest != cat.Digest() {
				t.Fatalf("run %s: catalog digest %s, want the listed %s", id, c.CatalogDigest, cat.Digest())
			}
			re := &transport.Catalog{}
			for i, ti := range c.Tools {
				want := listed[0].Tools[i]
				if ti.Name != want.Name || ti.Digest != want.Digest || ti.Description != want.Description || ti.Title != want.Title {
					t.Fatalf("run %s tool %d: %+v, want name, title, description and digest of %+v", id, i, ti, want)
				}
				whole := len(ti.InputSchema) > 0 || len(ti.OutputSchema) > 0 || len(ti.Annotations) > 0 || len(ti.Execution) > 0
				if called := ti.Name == "echo"; whole != called || (called && !slices.Equal(ti.InputSchema, want.InputSchema)) {
					t.Fatalf("run %s recorded tool %q with schemas %v; want them for the called tool only, as listed", id, ti.Name, whole)
				}
				re.Tools = append(re.Tools, transport.Tool{Name: ti.Name}.WithDigest(ti.Digest))
			}
			if len(c.Tools) != len(listed[0].Tools) || re.Digest() != c.CatalogDigest {
				t.Fatalf("run %s: %d tools whose digests hash to %s; want %d hashing to %s", id, len(c.Tools), re.Digest(), len(listed[0].Tools), c.CatalogDigest)
			}
			if mm, err := projector.VerifyProjection(ctx, db, id); err != nil || len(mm) > 0 {
				t.Fatalf("inspect --verify %s: %v %v", id, mm, err)
			}
			rp, err := replay.Prepare(ctx, db, id)
			if err != nil {
				t.Fatalf("replay %s: %v", id, err)
			}
			res, err := (&workflow.Runner{DB: db, Dialer: rp.Dialer}).Run(ctx, rp.Workflow, rp.Inputs, workflow.RunOptions{Mode: "replay", SourceRunID: id})
			if err != nil || res.Err != nil || res.State != workflow.StateSucceeded {
				t.Fatalf("replay of %s: %v %v", id, err, res)
			}
		}
	})
}
