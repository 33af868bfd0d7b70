package main

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestShippingCodeReadsNoTestSwitch: the test switches (the SIGKILL after an
// event, the full disk) live in hooks_test.go only. No non-test file of
// agentctl or of any package it is built from names an AGENTCTL_TEST_
// variable, so a stray environment variable cannot kill a user's run.
func TestShippingCodeReadsNoTestSwitch(t *testing.T) {
	const module = "github.com/agentctl/agentctl/"
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var walk func(rel string)
	walk = func(rel string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		dir := filepath.Join(root, filepath.FromSlash(rel))
		pkg, err := build.Default.ImportDir(dir, 0)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, f := range append(pkg.GoFiles, pkg.CgoFiles...) {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			if i := strings.Index(string(b), "AGENTCTL_TEST_"); i >= 0 {
				line := 1 + strings.Count(string(b[:i]), "\n")
				t.Errorf("%s/%s:%d names a test switch; it belongs in a _test.go file (testHooks)", rel, f, line)
			}
		}
		for _, imp := range pkg.Imports {
			if dep, ok := strings.CutPrefix(imp, module); ok {
				walk(dep)
			}
		}
	}
	walk("cmd/agentctl")
	if !seen["workflow"] || !seen["events"] {
		t.Fatalf("walked %v; want at least workflow and events", seen)
	}
}
