package transport

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/agentctl/agentctl/internal/canonjson"
)

// stdio: a server that is a local program (Config.Command) speaks MCP as
// newline-delimited JSON-RPC on its stdin and stdout. The process is the
// session: Connect starts it (one process per Session), Close ends it, and
// its death is the loss of the session. Everything else (initialize,
// tools/list, tools/call, tasks, progress, server requests, redaction,
// bounds, timeouts, the error taxonomy) is what the HTTP transport does.
//
// Two frames exist only on stdio, both Dir "local": "process" (handed to
// the sink when the process has started, before initialize is written:
// pid, start time, program, args, cwd, env names) and "process_exit"
// (handed to the sink by Close: exit status, signal, the stderr tail).

// StdioBaseEnv lists the variables of agentctl's own environment a stdio
// server inherits (when set); it gets nothing else but what Config.Env
// declares.
var StdioBaseEnv = []string{"PATH", "HOME", "LANG", "TERM", "USER", "SHELL", "TMPDIR"}

// EnvValue is one declared variable of a stdio server: a literal Value, or
// a secret reference Ref (resolved when the process starts, redacted from
// every frame and error).
type EnvValue struct {
	Value string
	Ref   SecretRef
}

// IsSecret reports whether the value is a secret reference.
func (v EnvValue) IsSecret() bool { return v.Ref.Env != "" || v.Ref.File != "" }

// defaultShutdownGrace is the wait after closing stdin, and again after
// SIGTERM, before the next step of a stdio server's shutdown.
const defaultShutdownGrace = 2 * time.Second

// StderrTailBytes bounds the stderr tail kept for a stdio server.
const StderrTailBytes = 8 << 10

// errTailBytes bounds the stderr tail quoted in an error message.
const errTailBytes = 2 << 10

// stdioSpec is a stdio client's resolved command.
type stdioSpec struct {
	path  string // absolute, resolved on PATH once
	args  []string
	dir   string
	env   map[string]EnvValue
	grace time.Duration
}

// newStdioSpec resolves cfg.Command's program (on PATH when it has no
// slash) to an absolute path; a missing program is an error here.
func newStdioSpec(cfg Config) (*stdioSpec, error) {
	prog := cfg.Command[0]
	if strings.TrimSpace(prog) == "" {
		return nil, &Error{Op: "start", Kind: KindTransportLoss, Message: "stdio server: the program (command[0]) is empty"}
	}
	path, err := exec.LookPath(prog)
	if err != nil && !errors.Is(err, exec.ErrDot) {
		return nil, &Error{Op: "start", Kind: KindTransportLoss, Err: fmt.Errorf("stdio server: program %q: %w", prog, unwrapExecErr(err))}
	}
	if path, err = filepath.Abs(path); err != nil {
		return nil, &Error{Op: "start", Kind: KindTransportLoss, Err: fmt.Errorf("stdio server: program %q: %w", prog, err)}
	}
	for name, v := range cfg.Env {
		if name == "" || strings.ContainsAny(name, "=\x00") {
			return nil, &Error{Op: "config", Kind: KindPolicyDenied, Err: fmt.Errorf("invalid environment variable name %q", name)}
		}
		if v.IsSecret() && v.Ref.Env != "" && v.Ref.File != "" {
			return nil, &Error{Op: "config", Kind: KindPolicyDenied, Err: fmt.Errorf("env %q: secret reference needs exactly one of env and file", name)}
		}
	}
	grace := cfg.ShutdownGrace
	if grace <= 0 {
		grace = defaultShutdownGrace
	}
	return &stdioSpec{path: path, args: cfg.Command[1:], dir: cfg.Dir, env: cfg.Env, grace: grace}, nil
}

func unwrapExecErr(err error) error {
	var ee *exec.Error
	if errors.As(err, &ee) {
		return ee.Err
	}
	return err
}

// Program returns the absolute path of a stdio client's program, "" for HTTP.
func (c *Client) Program() string {
	if c.stdio == nil {
		return ""
	}
	return c.stdio.path
}

// environ builds the child's environment: the base set from getenv, then
// the declared variables (secret references resolved now and added to
// the redactor). Sorted, so the order never depends on a map.
func (c *Client) environ() ([]string, error) {
	vals := map[string]string{}
	for _, k := range StdioBaseEnv {
		if v := c.getenv(k); v != "" {
			vals[k] = v
		}
	}
	for name, v := range c.stdio.env {
		if !v.IsSecret() {
			vals[name] = v.Value
			continue
		}
		s, err := v.Ref.resolve(c.cfg.Policy, c.getenv)
		if err != nil {
			return nil, err
		}
		c.red.add(s)
		vals[name] = s
	}
	keys := make([]string, 0, len(vals))
	for k := range vals {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	env := make([]string, len(keys))
	for i, k := range keys {
		env[i] = k + "=" + vals[k]
	}
	return env, nil
}

// ProcessInfo is what the "process" frame records of a started server.
type ProcessInfo struct {
	PID       int      `json:"pid"`
	StartTime uint64   `json:"startTime"` // /proc/PID/stat field 22 (clock ticks after boot); 0 where unknown
	Program   string   `json:"program"`   // absolute path
	Args      []string `json:"args"`
	Cwd       string   `json:"cwd,omitempty"`
	Env       []string `json:"env"` // names only
}

// ProcessExit is what the "process_exit" frame records.
type ProcessExit struct {
	PID        int    `json:"pid"`
	ExitCode   int    `json:"exitCode"`         // -1 when killed by a signal
	Signal     string `json:"signal,omitempty"` // the signal that ended it
	Stopped    string `json:"stoppedBy"`        // "exit" (on its own or after stdin closed), "sigterm", "sigkill"
	StderrTail string `json:"stderrTail"`       // last StderrTailBytes of stderr, redacted and sanitized
	Dropped    int    `json:"unattributedDropped,omitempty"`
}

// start launches the server process and hands the "process" frame to the
// sink before anything is written to it.
func (s *Session) start(ctx context.Context, sink Sink) error {
	c := s.c
	env, err := c.environ()
	if err != nil {
		return err
	}
	p, err := startProc(c.stdio, env, c.maxBytes, c.red, c.cfg.Elicitation)
	if err != nil {
		return &Error{Op: "start", Kind: KindTransportLoss, Err: c.red.error(err)}
	}
	s.proc, s.procSink = p, sink
	names := make([]string, len(env))
	for i, kv := range env {
		names[i], _, _ = strings.Cut(kv, "=")
	}
	info := ProcessInfo{PID: p.pid, StartTime: p.startTime, Program: c.stdio.path, Args: append([]string{}, c.stdio.args...), Cwd: c.stdio.dir, Env: names}
	if err := s.emitLocal(ctx, sink, "process", info); err != nil {
		p.stop(0)
		return &Error{Op: "start", Kind: KindTransportLoss, Err: err}
	}
	return nil
}

// emitLocal hands a "local" frame (process, process_exit) to sink, redacted.
func (s *Session) emitLocal(ctx context.Context, sink Sink, kind string, v any) error {
	if sink == nil {
		return nil
	}
	body, err := canonjson.Marshal(v)
	if err != nil {
		return err
	}
	if err := sink(ctx, Frame{Dir: "local", Kind: kind, Body: s.c.red.json(body)}); err != nil {
		return fmt.Errorf("%w (local %s): %w", errSinkRejected, kind, err)
	}
	return nil
}

// closeStdio ends the process (close stdin, grace, SIGTERM to the group,
// grace, SIGKILL), then hands the frames nobody took and the
// "process_exit" frame to sink.
func (s *Session) closeStdio(ctx context.Context, sink Sink) error {
	if s.closed.Swap(true) {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	ex := s.proc.stop(s.c.stdio.grace)
	for _, f := range s.proc.takeOrphans() {
		if sink != nil {
			f.Body = s.c.red.json(f.Body)
			_ = sink(ctx, f)
		}
	}
	return s.emitLocal(ctx, sink, "process_exit", ex)
}

// StderrTail returns the redacted, sanitized last bytes a stdio server
// wrote on stderr so far ("" for HTTP).
func (s *Session) StderrTail() string {
	if s.proc == nil {
		return ""
	}
	return s.proc.tail(StderrTailBytes)
}

// stdioStartFailed completes a start-up failure with what the process said
// before dying, when it died.
func (s *Session) stdioStartFailed(err error) error {
	if s.proc == nil {
		return err
	}
	s.proc.stop(s.c.stdio.grace)
	var te *Error
	if errors.As(err, &te) && te.Kind != KindTimeout && !strings.Contains(te.Message, "stderr") {
		if tail := s.proc.tail(errTailBytes); tail != "" {
			te.Message = strings.TrimSpace(te.Message + "; stderr: " + tail)
		}
	}
	return err
}
