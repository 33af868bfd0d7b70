package fsm

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/graph.dot from Graph()")

// TestGraph keeps the machine's shape under review: any new edge or guard
// shows up as a diff of testdata/graph.dot. Regenerate with
// `go test ./fsm/ -run TestGraph -update`.
func TestGraph(t *testing.T) {
	got := Graph()
	golden := filepath.Join("testdata", "graph.dot")
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("read golden (run with -update to create it): %v", err)
	}
	if got != string(want) {
		t.Errorf("Graph() differs from %s; rerun with -update and review the diff.\ngot:\n%s", golden, got)
	}
}

// TestGraphDeterministic guards against map-order leaks from stateless.
func TestGraphDeterministic(t *testing.T) {
	first := Graph()
	for i := 0; i < 200; i++ {
		if g := Graph(); g != first {
			t.Fatalf("Graph() changed between calls (iteration %d):\n%s\n---\n%s", i, first, g)
		}
	}
}
