package demotest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentctl/agentctl/internal/demoserver"
)

// PeerEnv is the variable a test binary's TestMain reads to become a stdio
// MCP peer (see StdioPeer); tests declare it in the server's env, since a
// stdio server inherits nothing else from the test.
const PeerEnv = "AGENTCTL_STDIO_PEER"

// StartsEnv, when set in a peer's environment, names a file the peer
// appends one line to each time it starts (a replay must start none).
const StartsEnv = "AGENTCTL_STDIO_PEER_STARTS"

// CallsEnv, when set in a demo peer's environment, names a file the peer
// appends "TOOL PID" to each time a tool handler starts: executions
// counted server-side, across the processes of a run and its resume.
const CallsEnv = "AGENTCTL_STDIO_PEER_CALLS"

// DieEnv, when set in a demo peer's environment (with StartsEnv), names a
// tool whose handler, in the first process started only, is counted and
// then exits the process (status 2) before answering: a server that ran
// the call and died.
const DieEnv = "AGENTCTL_STDIO_PEER_DIE"

// LingerEnv, when set in a demo peer's environment, makes the peer
// outlive a parent that died: when its stdin ends and its parent is gone
// (it was reparented), it stays alive until a signal ends it, so only the
// parent-death signal (or a resume ending it) stops it. When its stdin
// ends and its parent is alive (a clean end), it exits as usual.
const LingerEnv = "AGENTCTL_STDIO_PEER_LINGER"

// ProtocolEnv, when set in a demo peer's environment, restricts the demo
// server to that MCP revision (demoserver.Options.Protocol), e.g.
// "2026-07-28".
const ProtocolEnv = "AGENTCTL_STDIO_PEER_PROTOCOL"

// StdioPeer runs this process as a stdio MCP server in mode and returns
// its exit code; a test binary calls it from TestMain when PeerEnv is set:
//
//   - demo: the demo server (go-sdk) over stdin/stdout
//   - banner: prints a banner line on stdout, then demo
//   - flood: demo, while writing 16 MiB to stderr
//   - exit: writes a reason on stderr and exits 3 at once
//   - silent: reads stdin and never answers
//   - raw: a hand-written peer: tools echo (sends a ping request and a
//     progress notification before its result), die (exits 2 mid-call,
//     after a line on stderr; with StartsEnv set, only the first process
//     started dies, later ones answer like echo) and hang (stuck for good, deaf even to the end of stdin;
//     with StartsEnv set, appends "hang PID" to that file first) and task
//     (task support required: answers a CreateTaskResult, then at once a
//     notifications/tasks/status, which arrives between two exchanges;
//     tasks/get says completed, tasks/result echoes the arguments)
func StdioPeer(mode string) int {
	if f := os.Getenv(StartsEnv); f != "" {
		appendLine(f, fmt.Sprintf("start %d %d", os.Getpid(), selfStartTime()))
	}
	switch mode {
	case "exit":
		fmt.Fprintln(os.Stderr, "fatal: no configuration found (stdio peer exits at once)")
		return 3
	case "silent":
		_, _ = io.Copy(io.Discard, os.Stdin)
		return 0
	case "raw":
		return rawPeer(os.Stdin, os.Stdout)
	case "banner":
		fmt.Println("Welcome to the demo server v1!")
	case "flood":
		go func() {
			line := strings.Repeat("x", 1023) + "\n"
			for i := 0; i < 16<<10; i++ {
				if _, err := io.WriteString(os.Stderr, line); err != nil {
					return
				}
			}
		}()
	case "demo":
	default:
		fmt.Fprintf(os.Stderr, "unknown peer mode %q\n", mode)
		return 2
	}
	ppid := os.Getppid()
	if err := demoserver.New(demoserver.Options{OnCall: onCall(), Protocol: os.Getenv(ProtocolEnv)}).ServeStdio(context.Background(), os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		return 1
	}
	if os.Getenv(LingerEnv) != "" && orphaned(ppid) {
		select {} // until a signal's default action ends the process
	}
	return 0
}

type rawMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
}

// rawPeer answers line by line; it is single-threaded on purpose: a hang
// leaves it blocked as a stuck server would be.
func rawPeer(r io.Reader, w io.Writer) int {
	in := bufio.NewScanner(r)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	send := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "%s\n", b)
	}
	reply := func(id json.RawMessage, result any) {
		send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
	}
	obj := map[string]any{"type": "object"}
	var taskArgs json.RawMessage // the task tool's arguments
	for in.Scan() {
		var m rawMsg
		if json.Unmarshal(in.Bytes(), &m) != nil {
			continue
		}
		switch m.Method {
		case "initialize":
			reply(m.ID, map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{},
				"tasks": map[string]any{"requests": map[string]any{"tools": map[string]any{"call": map[string]any{}}}}},
				"serverInfo": map[string]any{"name": "raw-peer", "version": "1"}})
		case "tools/list":
			reply(m.ID, map[string]any{"tools": []any{
				map[string]any{"name": "echo", "inputSchema": obj},
				map[string]any{"name": "die", "inputSchema": obj},
				map[string]any{"name": "hang", "inputSchema": obj},
				map[string]any{"name": "task", "inputSchema": obj, "execution": map[string]any{"taskSupport": "required"}},
			}})
		case "tools/call":
			var p struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
				Meta      struct {
					Token json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			}
			_ = json.Unmarshal(m.Params, &p)
			switch p.Name {
			case "task":
				taskArgs = p.Arguments
				reply(m.ID, map[string]any{"task": rawTask("working")})
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tasks/status", "params": rawTask("working")})
				continue
			case "die":
				if starts() <= 1 {
					fmt.Fprintln(os.Stderr, "raw peer: dying in the middle of a call")
					os.Exit(2)
				}
			case "hang":
				if f := os.Getenv(StartsEnv); f != "" {
					if fh, err := os.OpenFile(f, os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
						fmt.Fprintf(fh, "hang %d\n", os.Getpid())
						fh.Close()
					}
				}
				select {} // stuck for good: reads nothing more, not even the end of stdin
			}
			send(map[string]any{"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
			if !in.Scan() { // our ping's answer
				return 1
			}
			send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": p.Meta.Token, "progress": 1, "total": 1}})
			reply(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": string(p.Arguments)}}, "structuredContent": json.RawMessage(p.Arguments)})
		case "ping":
			reply(m.ID, map[string]any{})
		case "tasks/get":
			reply(m.ID, rawTask("completed"))
		case "tasks/result":
			reply(m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": string(taskArgs)}}, "structuredContent": taskArgs})
		}
	}
	return 0
}

// rawTask is the raw peer's one task with status. Its poll interval
// leaves the status notification sent after the CreateTaskResult half a
// second to arrive before the first tasks/get.
func rawTask(status string) map[string]any {
	return map[string]any{"taskId": "raw-task-1", "status": status, "statusMessage": status, "ttl": 60000, "pollInterval": 500,
		"createdAt": "2026-01-01T00:00:00Z", "lastUpdatedAt": "2026-01-01T00:00:00Z"}
}

// starts counts the starts recorded in StartsEnv's file (0 when unset).
func starts() int {
	b, err := os.ReadFile(os.Getenv(StartsEnv))
	if err != nil {
		return 0
	}
	return strings.Count(string(b), "start ")
}

// onCall counts each execution in CallsEnv's file and dies as DieEnv says;
// nil when neither is set.
func onCall() func(string) {
	calls, die := os.Getenv(CallsEnv), os.Getenv(DieEnv)
	if calls == "" && die == "" {
		return nil
	}
	return func(tool string) {
		if calls != "" {
			appendLine(calls, fmt.Sprintf("%s %d", tool, os.Getpid()))
		}
		if tool == die && starts() <= 1 {
			fmt.Fprintf(os.Stderr, "demo peer: %s ran, dying before the answer\n", tool)
			os.Exit(2)
		}
	}
}

// appendLine appends line to file (one write: lines of concurrent
// processes do not interleave).
func appendLine(file, line string) {
	if fh, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
		_, _ = fh.WriteString(line + "\n")
		fh.Close()
	}
}

// selfStartTime is field 22 of /proc/self/stat (0 where unknown), so that
// a test can tell this process from a later one given its pid.
func selfStartTime() uint64 {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return 0
	}
	n, _ := strconv.ParseUint(f[19], 10, 64)
	return n
}

// orphaned reports whether this process's parent, once ppid, is gone. A
// dying parent closes its files (our stdin ends) just before its children
// are reparented, so the change is looked for during a short while.
func orphaned(ppid int) bool {
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		if os.Getppid() != ppid {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}
