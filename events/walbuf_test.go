package events

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// TestWalbuf_ReaderSeesEveryCommit: with a WAL file's writes held in
// walbuf.c's buffer until its commit frame, a second handle on the same
// file (its own connections and file descriptors, as another process has)
// reads every commit the moment Append returns, across the background
// checkpointer's copies and the WAL's restarts, and a commit larger than
// the buffer; and every commit went
// through the buffer, one write each.
func TestWalbuf_ReaderSeesEveryCommit(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "w.db")
	w, err := Open(ctx, path, Options{Durability: DurabilityNormal})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	r, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c0 := walbufCommits()
	const commits = 3*checkpointEvery + 17 // past several checkpoints and WAL restarts
	big := strings.Repeat("x", 5000)       // events that overflow a page
	for i := 0; i < commits; i++ {
		recs := []Record{
			{Stream: "run", Type: "x", Payload: map[string]any{"i": i, "pad": big[:i%5000]}},
			{Stream: "run", Type: "y", Payload: map[string]any{"i": i}},
		}
		if _, err := w.Append(ctx, "run-w", recs, nil); err != nil {
			t.Fatal(err)
		}
		evs, err := r.Events(ctx, "run-w")
		if err != nil {
			t.Fatalf("commit %d: reader: %v", i, err)
		}
		if len(evs) != 2*(i+1) || !strings.Contains(evs[len(evs)-2].Payload, `"i":`+strconv.Itoa(i)+`,`) {
			t.Fatalf("commit %d: reader sees %d events, want %d with the last commit's payload", i, len(evs), 2*(i+1))
		}
	}
	// One commit larger than the buffer's bound and than one write of the
	// default VFS (128 KiB): written in pieces, read back whole.
	var recs []Record
	for i := 0; i < 1500; i++ {
		recs = append(recs, Record{Stream: "run", Type: "z", Payload: map[string]any{"i": i, "pad": big[:1000]}})
	}
	if _, err := w.Append(ctx, "run-w", recs, nil); err != nil {
		t.Fatal(err)
	}
	if evs, err := r.Events(ctx, "run-w"); err != nil || len(evs) != 2*commits+len(recs) {
		t.Fatalf("after a 1.5 MB commit the reader sees %d events (%v), want %d", len(evs), err, 2*commits+len(recs))
	}
	if err := r.RequireIntact(ctx, "run-w"); err != nil {
		t.Fatal(err)
	}
	if sqliteVFS() == "" {
		// Open needed cgo; walbuf.c is built for Linux and macOS.
		if (runtime.GOOS == "linux" || runtime.GOOS == "darwin") && os.Getenv("AGENTCTL_SQLITE_WALBUF") != "off" {
			t.Fatalf("walbuf is not registered on %s", runtime.GOOS)
		}
		return
	}
	if n := walbufCommits() - c0; n < commits {
		t.Fatalf("%d commits went through walbuf's buffer, want at least %d", n, commits)
	}
}

// TestWalbuf_KilledWriterLosesNothingAcknowledged: a writer process killed
// (SIGKILL) while it appends leaves a database that opens, whose chain
// verifies, and that holds every commit the writer had seen acknowledged:
// bytes still in walbuf.c's buffer belonged to a commit not yet made.
func TestWalbuf_KilledWriterLosesNothingAcknowledged(t *testing.T) {
	if path := os.Getenv("AGENTCTL_WALBUF_CHILD"); path != "" {
		walbufChild(path)
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL")
	}
	path := filepath.Join(t.TempDir(), "k.db")
	cmd := exec.Command(os.Args[0], "-test.run", "^TestWalbuf_KilledWriterLosesNothingAcknowledged$")
	cmd.Env = append(os.Environ(), "AGENTCTL_WALBUF_CHILD="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	acked := 0
	for sc.Scan() {
		n, err := strconv.Atoi(sc.Text())
		if err != nil {
			continue // the test binary's own output
		}
		if acked = n; acked >= 400 {
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if acked < 400 {
		t.Fatalf("the writer acknowledged %d commits before it ended", acked)
	}
	db, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.RequireIntact(context.Background(), "run-k"); err != nil {
		t.Fatal(err)
	}
	evs, err := db.Events(context.Background(), "run-k")
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) < 2*acked {
		t.Fatalf("%d events after the kill, want at least the %d acknowledged", len(evs), 2*acked)
	}
}

// walbufChild appends to path until it is killed, printing the number of
// commits acknowledged after each.
func walbufChild(path string) {
	ctx := context.Background()
	db, err := Open(ctx, path, Options{Durability: DurabilityNormal})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(2)
	}
	pad := strings.Repeat("p", 3000)
	for i := 1; ; i++ {
		recs := []Record{{Stream: "run", Type: "x", Payload: map[string]any{"i": i, "pad": pad[:i%3000]}}, {Stream: "run", Type: "y", Payload: i}}
		if _, err := db.Append(ctx, "run-k", recs, nil); err != nil {
			fmt.Println("append:", err)
			os.Exit(2)
		}
		fmt.Println(i)
	}
}
