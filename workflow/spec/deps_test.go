package spec

import (
	"go/build"
	"path/filepath"
	"strings"
	"testing"
)

// TestStandsAlone keeps the language learnable and testable alone: neither
// package spec nor anything it imports (its tests included) reaches the
// event log, the state machine, the projector, the migrations or the run
// loop. It reads the import graph from the source, so a new import that
// breaks the rule fails here, naming the chain that leads to it.
func TestStandsAlone(t *testing.T) {
	const module = "github.com/agentctl/agentctl/"
	forbidden := map[string]bool{"events": true, "fsm": true, "projector": true, "migrations": true, "workflow": true}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(rel, chain string, tests bool)
	walk = func(rel, chain string, tests bool) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		pkg, err := build.Default.ImportDir(filepath.Join(root, filepath.FromSlash(rel)), 0)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		imports := pkg.Imports
		if tests {
			imports = append(append(imports, pkg.TestImports...), pkg.XTestImports...)
		}
		for _, imp := range imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			top, _, _ := strings.Cut(dep, "/")
			if forbidden[dep] || (forbidden[top] && dep != "workflow/spec") {
				t.Errorf("workflow/spec reaches %s: %s → %s", dep, chain, dep)
				continue
			}
			walk(dep, chain+" → "+dep, false)
		}
	}
	walk("workflow/spec", "workflow/spec", true)
	if !seen["transport"] {
		t.Fatalf("walked %v; want at least transport (the URL policy): is the walk reading the source?", seen)
	}
}
