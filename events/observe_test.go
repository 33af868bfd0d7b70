package events

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// TestObserveCommits_BatchWithFailedMember: a batch of four appends, one
// of which fails its compare-and-append, is one commit to the observer,
// carrying exactly the three committed appends' events in commit order;
// a refused lone append is no commit at all, and ObserveCommits(nil)
// stops the reports.
func TestObserveCommits_BatchWithFailedMember(t *testing.T) {
	db, err := Open(context.Background(), filepath.Join(t.TempDir(), "o.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	type seen struct {
		types [][]string
		ok    bool
	}
	var got []seen
	db.ObserveCommits(func(ci CommitInfo) {
		s := seen{ok: ci.Latency > 0}
		for _, evs := range ci.Appends {
			var ts []string
			for _, e := range evs {
				ts = append(ts, e.RunID+"/"+e.Type)
			}
			s.types = append(s.types, ts)
		}
		got = append(got, s)
	})
	joined := make(chan bool, 8)
	db.group.queued = func(lead bool) { joined <- lead }
	rec := func(typ string) []Record { return []Record{{Stream: "run", Type: typ}} }
	steps := []struct {
		run   string
		after int64
		recs  []Record
	}{
		{"run-a", -1, rec("a.one")}, // leads alone
		{"run-a", -1, append(rec("a.two"), rec("a.three")...)},
		{"run-a", 1, rec("a.stale")}, // conflict: a.two moved run-a on
		{"run-b", -1, rec("b.one")},
		{"run-a", 3, rec("a.four")},
	}
	errs := make([]error, len(steps))
	var wg sync.WaitGroup
	db.wmu.Lock()
	for i, s := range steps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = db.AppendAfter(context.Background(), s.run, s.after, s.recs, nil)
		}()
		<-joined
	}
	db.wmu.Unlock()
	wg.Wait()
	if !errors.Is(errs[2], ErrConflict) {
		t.Fatalf("stale append: %v, want ErrConflict", errs[2])
	}
	want := []seen{
		{types: [][]string{{"run-a/a.one"}}, ok: true},
		{types: [][]string{{"run-a/a.two", "run-a/a.three"}, {"run-b/b.one"}, {"run-a/a.four"}}, ok: true},
	}
	if !equalSeen(got, want, func(a, b seen) bool { return a.ok == b.ok && equalTypes(a.types, b.types) }) {
		t.Fatalf("observed %+v\nwant     %+v", got, want)
	}

	db.group.queued = nil
	if _, err := db.AppendAfter(context.Background(), "run-b", 0, rec("b.stale"), nil); !errors.Is(err, ErrConflict) {
		t.Fatalf("lone stale append: %v", err)
	}
	db.ObserveCommits(nil)
	if _, err := db.Append(context.Background(), "run-b", rec("b.two"), nil); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 {
		t.Fatalf("%d commits observed after a refused append and ObserveCommits(nil), want 2: %+v", len(got), got)
	}
}

func equalSeen[T any](a, b []T, eq func(T, T) bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !eq(a[i], b[i]) {
			return false
		}
	}
	return true
}

func equalTypes(a, b [][]string) bool {
	return equalSeen(a, b, func(x, y []string) bool {
		return equalSeen(x, y, func(p, q string) bool { return p == q })
	})
}
