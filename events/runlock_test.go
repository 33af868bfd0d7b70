package events_test

import (
	"errors"
	"testing"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/internal/testkit"
)

// TestLockRun: a run has one writer at a time; the lock is per run and
// comes back when released. (Exclusion between processes, where the kernel
// holds the lock, is TestCLI_ConcurrentResumesOneWins.)
func TestLockRun(t *testing.T) {
	db := testkit.OpenDB(t, "", events.Options{})
	unlock, err := db.LockRun("run-a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.LockRun("run-a"); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("second lock of run-a: %v, want ErrRunBusy", err)
	}
	unlockB, err := db.LockRun("run-b")
	if err != nil {
		t.Fatalf("run-b while run-a is held: %v", err)
	}
	unlockB()
	unlock()
	unlock() // a second unlock is harmless
	again, err := db.LockRun("run-a")
	if err != nil {
		t.Fatalf("run-a after unlock: %v", err)
	}
	again()
}
