// Package tspeer starts the reference TypeScript MCP "everything" server
// (@modelcontextprotocol/server-everything, pinned in interop/package.json)
// as a test peer over Streamable HTTP.
//
// It is a test helper only: no production code may import it.
//
// The server listens on all interfaces by default and has a tool (get-env)
// that returns its whole environment. So it is always started
//
//   - with an empty environment except PATH (node's directory, /usr/bin,
//     /bin), HOME (a per-test temporary directory) and PORT, and
//   - with interop/loopback.cjs preloaded, which forces every listen onto
//     127.0.0.1.
//
// Install it once with `npm ci --prefix interop` (see interop/README.md).
package tspeer

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// InstallHint is the command that installs the reference server.
const InstallHint = "npm ci --prefix interop"

const (
	entryRel   = "interop/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
	preloadRel = "interop/loopback.cjs"
	// startTimeout bounds how long Start waits for the port to accept.
	startTimeout = 30 * time.Second
)

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory that contains go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("tspeer: go.mod not found above the working directory")
		}
		dir = parent
	}
}

type install struct {
	root, node, entry, preload string
}

func locate() (install, error) {
	root, err := RepoRoot()
	if err != nil {
		return install{}, err
	}
	in := install{root: root, entry: filepath.Join(root, entryRel), preload: filepath.Join(root, preloadRel)}
	if _, err := os.Stat(in.entry); err != nil {
		return install{}, fmt.Errorf("reference TypeScript server not installed: run `%s` (missing %s)", InstallHint, entryRel)
	}
	if _, err := os.Stat(in.preload); err != nil {
		return install{}, fmt.Errorf("tspeer: loopback preload missing: %w", err)
	}
	in.node, err = exec.LookPath("node")
	if err != nil {
		return install{}, fmt.Errorf("reference TypeScript server needs node on PATH: %w", err)
	}
	if in.node, err = filepath.Abs(in.node); err != nil {
		return install{}, err
	}
	return in, nil
}

// Installed reports whether the reference server can be started: nil when
// node is on PATH and interop/node_modules holds the pinned package,
// otherwise an error saying to run `npm ci --prefix interop`.
func Installed() error {
	_, err := locate()
	return err
}

// Start launches the reference server on a free 127.0.0.1 port in its own
// process group, waits until the port accepts connections, and registers a
// cleanup that kills the process group and waits for it. It returns the
// endpoint URL "http://127.0.0.1:PORT/mcp".
//
// A missing installation fails the test (it is never skipped) with
// "reference TypeScript server not installed: run `npm ci --prefix interop`".
func Start(tb testing.TB) (url string) {
	tb.Helper()
	in, err := locate()
	if err != nil {
		tb.Fatal(err)
	}
	return startNode(tb, in, in.entry, "streamableHttp")
}

// startNode runs node with the loopback preload on entry and args, as
// Start describes, and returns the endpoint URL.
func startNode(tb testing.TB, in install, entry string, args ...string) string {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatalf("tspeer: pick a free port: %v", err)
	}

	out := &tailBuffer{max: 64 << 10}
	cmd := exec.Command(in.node, append([]string{"--require", in.preload, entry}, args...)...)
	cmd.Dir = tb.TempDir()
	// Exactly these variables, like `env -i`: nothing of the test process
	// (tokens, canaries, proxies) reaches the child.
	cmd.Env = []string{
		"PATH=" + filepath.Dir(in.node) + ":/usr/bin:/bin",
		"HOME=" + cmd.Dir,
		"PORT=" + strconv.Itoa(port),
	}
	cmd.Stdout, cmd.Stderr = out, out
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		tb.Fatalf("tspeer: start node: %v", err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		killGroup(cmd.Process)
		<-exited
		if tb.Failed() {
			tb.Logf("tspeer: reference server output (tail):\n%s", out.String())
		}
	})

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(startTimeout)
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			_ = c.Close()
			break
		}
		if time.Now().After(deadline) {
			tb.Fatalf("tspeer: reference server did not accept on %s within %v: %v\n%s", addr, startTimeout, err, out.String())
		}
		select {
		case <-exited:
			tb.Fatalf("tspeer: reference server exited before listening (%v):\n%s", waitErr, out.String())
		case <-tick.C:
		}
	}
	if err := checkLoopbackOnly(port); err != nil {
		tb.Fatalf("tspeer: %v", err)
	}
	return "http://" + addr + "/mcp"
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// checkLoopbackOnly inspects the kernel's socket tables (Linux only; a no-op
// elsewhere) and fails if a listening socket on port is bound to anything but
// 127.0.0.1. This needs no traffic to a non-loopback address.
func checkLoopbackOnly(port int) error {
	found := false
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		n, err := loopbackListeners(f, port)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", table, err)
		}
		found = found || n > 0
	}
	if _, err := os.Stat("/proc/net/tcp"); err == nil && !found {
		return fmt.Errorf("no listening socket on 127.0.0.1:%d in /proc/net/tcp", port)
	}
	return nil
}

// loopbackListeners reads a /proc/net/tcp{,6} table and counts the LISTEN
// sockets on port bound to 127.0.0.1; any other listener on port is an error.
func loopbackListeners(r io.Reader, port int) (int, error) {
	hexPort := fmt.Sprintf(":%04X", port)
	n := 0
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// sl local_address rem_address st ...; st 0A = LISTEN
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || fields[3] != "0A" || !strings.HasSuffix(fields[1], hexPort) {
			continue
		}
		if fields[1] != "0100007F"+hexPort {
			return n, fmt.Errorf("reference server listens on %s, not only on 127.0.0.1", fields[1])
		}
		n++
	}
	return n, sc.Err()
}

// tailBuffer keeps the last max bytes written to it; safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(p)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}
