package testkit

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// childEnv marks the test binary's re-run by TestPostgresURL_SkipsOnlyOutsideCI.
const childEnv = "AGENTCTL_TESTKIT_CHILD"

// TestPostgresURL_SkipsOnlyOutsideCI re-runs this test binary without
// AGENTCTL_TEST_POSTGRES: with CI unset a test needing PostgreSQL skips
// (the test binary passes), with CI set it fails, naming the variable.
func TestPostgresURL_SkipsOnlyOutsideCI(t *testing.T) {
	if os.Getenv(childEnv) != "" {
		t.Skip("the child run")
	}
	for _, c := range []struct {
		ci       string
		wantFail bool
		want     string
	}{
		{"", false, "--- SKIP: TestPostgresURL_Child"},
		{"true", true, "--- FAIL: TestPostgresURL_Child"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPostgresURL_Child$", "-test.v", "-test.count=1")
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, PostgresEnv+"=") && !strings.HasPrefix(kv, "CI=") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		cmd.Env = append(cmd.Env, childEnv+"=1", "CI="+c.ci)
		out, err := cmd.CombinedOutput()
		if (err != nil) != c.wantFail || !strings.Contains(string(out), c.want) || !strings.Contains(string(out), PostgresEnv) {
			t.Fatalf("CI=%q without %s: err %v, want failed=%v and %q naming the variable\n%s", c.ci, PostgresEnv, err, c.wantFail, c.want, out)
		}
		if strings.Contains(string(out), "reached past PostgresURL") {
			t.Fatalf("CI=%q: the test went on without a database\n%s", c.ci, out)
		}
	}
}

// TestPostgresURL_Child is run by TestPostgresURL_SkipsOnlyOutsideCI.
func TestPostgresURL_Child(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("run by TestPostgresURL_SkipsOnlyOutsideCI")
	}
	PostgresURL(t)
	t.Log("reached past PostgresURL")
}
