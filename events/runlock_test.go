package events_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
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

// TestLockRun_OtherPathsToTheFile: the run lock belongs to the database
// file, not to the name it was opened by. While one handle holds a run,
// a handle that reached the same file by a symlink, a hard link, a
// relative path through a symlinked directory or a bind mount is refused
// (each is what a `worker` or a `resume` given another --db would be), and
// gets the run once it is let go. A hard link is refused at Open
// (TestOpen_RefusesHardLinkedFile). Between processes:
// TestCLI_ResumeWhileRunningOtherPath.
func TestLockRun_OtherPathsToTheFile(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the run lock is on the database file itself on Linux only (open file description locks)")
	}
	cases := []struct {
		name string
		// path returns another path to the database file at db (in dir).
		path func(t *testing.T, dir, db string) string
	}{
		{"symlink", func(t *testing.T, dir, db string) string {
			p := filepath.Join(dir, "link.db")
			if err := os.Symlink(db, p); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		{"relative path through a symlinked directory", func(t *testing.T, dir, db string) string {
			if err := os.Symlink(dir, filepath.Join(dir, "again")); err != nil {
				t.Fatal(err)
			}
			t.Chdir(dir)
			return filepath.Join("again", ".", filepath.Base(db))
		}},
		{"bind mount", func(t *testing.T, dir, db string) string {
			mnt := filepath.Join(t.TempDir(), "mnt")
			if err := os.Mkdir(mnt, 0o700); err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("mount", "--bind", dir, mnt).CombinedOutput(); err != nil {
				t.Skipf("no bind mount here (needs root and mount(8)): %v %s", err, out)
			}
			t.Cleanup(func() {
				if out, err := exec.Command("umount", "--lazy", mnt).CombinedOutput(); err != nil {
					t.Errorf("umount %s: %v %s", mnt, err, out)
				}
			})
			return filepath.Join(mnt, filepath.Base(db))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "a.db")
			first := testkit.OpenDB(t, path, events.Options{})
			unlock, err := first.LockRun("run-a")
			if err != nil {
				t.Fatal(err)
			}
			other := testkit.OpenDB(t, c.path(t, dir, path), events.Options{})
			if _, err := other.LockRun("run-a"); !errors.Is(err, events.ErrRunBusy) {
				t.Fatalf("LockRun(run-a) through %s while held: %v, want ErrRunBusy", other.Path(), err)
			}
			if held, err := other.RunHeld(context.Background(), "run-a"); err != nil || !held {
				t.Fatalf("RunHeld(run-a) through %s = %v, %v; want true", other.Path(), held, err)
			}
			unlockB, err := other.LockRun("run-b")
			if err != nil {
				t.Fatalf("run-b through %s while run-a is held: %v", other.Path(), err)
			}
			if _, err := first.LockRun("run-b"); !errors.Is(err, events.ErrRunBusy) {
				t.Fatalf("LockRun(run-b) through %s while %s holds it: %v, want ErrRunBusy", path, other.Path(), err)
			}
			unlockB()
			unlock()
			again, err := other.LockRun("run-a")
			if err != nil {
				t.Fatalf("run-a through %s after it was let go: %v", other.Path(), err)
			}
			again()
		})
	}
}

// TestLockRun_FileReplacedSinceOpen: a database file replaced under its
// name after Open is not locked in the new file's place: LockRun fails,
// naming the path, rather than lock a file the handle does not write.
func TestLockRun_FileReplacedSinceOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	db := testkit.OpenDB(t, path, events.Options{})
	testkit.OpenDB(t, filepath.Join(dir, "b.db"), events.Options{}).Close()
	if err := os.Rename(filepath.Join(dir, "b.db"), path); err != nil {
		t.Fatal(err)
	}
	_, err := db.LockRun("run-a")
	var se *events.Error
	if !errors.As(err, &se) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "no longer the database file") {
		t.Fatalf("LockRun after the file was replaced: %v; want a storage error naming %s", err, path)
	}
}

// TestOpen_RefusesHardLinkedFile: a database file with a second name is
// refused by either name, before SQLite reads it: SQLite keeps the WAL
// beside the name it was given, so a process opening the other name would
// read a stale database and write a second WAL, and could take over a run
// whose log it does not see. The handle that was open before the link
// keeps its run lock (it is on the file, not the name).
func TestOpen_RefusesHardLinkedFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.db")
	first := testkit.OpenDB(t, path, events.Options{})
	unlock, err := first.LockRun("run-a")
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	hard := filepath.Join(dir, "hard.db")
	if err := os.Link(path, hard); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{hard, path} {
		for _, ro := range []bool{false, true} {
			db, err := events.Open(context.Background(), p, events.Options{ReadOnly: ro})
			if err == nil {
				_ = db.Close()
			}
			var se *events.Error
			if !errors.Is(err, events.ErrHardLinked) || !errors.As(err, &se) || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "2 hard links") {
				t.Fatalf("Open(%s, ReadOnly=%v) of a file with 2 names: %v; want ErrHardLinked naming the path and the count", p, ro, err)
			}
		}
	}
	if _, err := first.LockRun("run-a"); !errors.Is(err, events.ErrRunBusy) {
		t.Fatalf("the first handle's run lock after the link: %v, want ErrRunBusy (still held)", err)
	}
}
