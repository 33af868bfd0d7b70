package main

import (
	"bufio"
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// initAllocBudget is what package init may allocate, in bytes, in
// agentctl's own packages, two of which used to do a command's work at
// init (BENCHMARKS.md, "Process startup"): projector/report parsed its page
// template (169 kB), events built its INSERT statements and compiled a
// regexp (105 kB). (The largest init left is a dependency's:
// santhosh-tekuri/jsonschema/v6 compiles five drafts' metaschemas, 1.7 MB,
// which only a change upstream removes.)
var initAllocBudget = map[string]int{
	"github.com/agentctl/agentctl/": 32 << 10, // a prefix: every package of the module
}

// TestPackageInitIsCheap runs `agentctl version` with GODEBUG=inittrace=1
// and holds each package's init allocations to initAllocBudget: work only
// some commands need is done on first use (sync.Once), not by every process.
func TestPackageInitIsCheap(t *testing.T) {
	cmd := subprocess(t, "version")
	cmd.Env = append(cmd.Env, "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("version: %v\n%s", err, stderr.String())
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(&stderr)
	for sc.Scan() {
		// init PKG @T ms, C ms clock, B bytes, N allocs
		f := strings.Fields(sc.Text())
		if len(f) < 11 || f[0] != "init" || f[8] != "bytes," {
			continue
		}
		pkg := f[1]
		if pkg == "github.com/agentctl/agentctl/cmd/agentctl" {
			continue // this test binary: its init includes the tests' tables
		}
		bytesAlloc, err := strconv.Atoi(f[7])
		if err != nil {
			t.Fatalf("inittrace line %q: %v", sc.Text(), err)
		}
		for prefix, budget := range initAllocBudget {
			if pkg == prefix || strings.HasSuffix(prefix, "/") && strings.HasPrefix(pkg, prefix) {
				seen[prefix] = true
				if bytesAlloc > budget {
					t.Errorf("init of %s allocates %d bytes, budget %d: do that work on first use", pkg, bytesAlloc, budget)
				}
			}
		}
	}
	for prefix := range initAllocBudget {
		if !seen[prefix] {
			t.Errorf("no inittrace line for %s in:\n%s", prefix, stderr.String())
		}
	}
}
