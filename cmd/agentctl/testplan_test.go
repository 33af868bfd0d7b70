package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMakeTestPreamble: make test runs scripts/test-plan.sh before go
// test, and the script says which suites run and which are skipped or
// will fail, and why: PostgreSQL without AGENTCTL_TEST_POSTGRES (its
// password never printed), the browser test without chromium, the
// TypeScript suites without node; under CI the missing ones fail.
func TestMakeTestPreamble(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	_, recipe, _ := strings.Cut(string(mk), "\ntest: interop\n")
	if plan, gotest, _ := strings.Cut(recipe, "\n"); !strings.Contains(plan, "scripts/test-plan.sh") || !strings.Contains(gotest, "test -race -count=1") || !strings.Contains(gotest, " ./...") {
		t.Fatalf("make test does not print the plan before go test:\n%s", recipe)
	}
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go on PATH")
	}
	// A PATH with go, and with node and chromium only when asked for.
	path := func(with ...string) string {
		dir := t.TempDir()
		if err := os.Symlink(gobin, filepath.Join(dir, "go")); err != nil {
			t.Fatal(err)
		}
		for _, name := range with {
			script := "#!" + bash + "\necho v0.0-test\n"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	plan := func(pathDir string, env ...string) string {
		t.Helper()
		cmd := exec.Command(bash, "../../scripts/test-plan.sh")
		cmd.Env = append([]string{"PATH=" + pathDir, "HOME=" + os.Getenv("HOME"), "GOCACHE=" + os.Getenv("GOCACHE"), "GOPATH=" + os.Getenv("GOPATH"),
			"GOFLAGS=" + os.Getenv("GOFLAGS"), "GOMODCACHE=" + os.Getenv("GOMODCACHE")}, env...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("test-plan.sh: %v\n%s", err, out)
		}
		return string(out)
	}
	out := plan(path())
	if !regexp.MustCompile(`over [1-9][0-9]* packages`).MatchString(out) {
		t.Errorf("bare PATH: no package count in:\n%s", out)
	}
	for _, want := range []string{"skip  PostgreSQL suites: AGENTCTL_TEST_POSTGRES is not set",
		"skip  the HTML report's browser test: no chromium on PATH", "FAIL  the TypeScript reference server suites: node is not on PATH"} {
		if !strings.Contains(out, want) {
			t.Errorf("bare PATH: no %q in:\n%s", want, out)
		}
	}
	out = plan(path("node", "chromium"), "AGENTCTL_TEST_POSTGRES=postgres://u:hunter2secret@127.0.0.1:5432/db")
	for _, want := range []string{"run   PostgreSQL suites", "postgres://u:***@127.0.0.1:5432/db", "run   the HTML report's browser test:",
		"run   the TypeScript reference server suites: node v0.0-test"} {
		if !strings.Contains(out, want) {
			t.Errorf("everything present: no %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hunter2secret") {
		t.Errorf("the preamble printed the database password:\n%s", out)
	}
	out = plan(path("node"), "CI=true")
	for _, want := range []string{"FAIL  PostgreSQL suites", "FAIL  the HTML report's browser test"} {
		if !strings.Contains(out, want) {
			t.Errorf("under CI: no %q in:\n%s", want, out)
		}
	}
}
