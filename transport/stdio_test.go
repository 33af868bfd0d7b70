package transport

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentctl/agentctl/internal/demoserver/demotest"
)

// TestMain turns this test binary into a stdio MCP peer when a test starts
// it with demotest.PeerEnv set (a stdio server inherits nothing else).
func TestMain(m *testing.M) {
	if mode := os.Getenv(demotest.PeerEnv); mode != "" {
		os.Exit(demotest.StdioPeer(mode))
	}
	os.Exit(m.Run())
}

// stdioClient returns a client whose server is this binary in mode.
func stdioClient(t *testing.T, mode string, mod func(*Config)) *Client {
	t.Helper()
	cfg := Config{Command: []string{os.Args[0]}, Env: map[string]EnvValue{demotest.PeerEnv: {Value: mode}},
		Timeout: 10 * time.Second, ShutdownGrace: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return c
}

// frameLog records frames as "dir kind method".
type frameLog struct {
	mu     sync.Mutex
	frames []Frame
}

func (l *frameLog) sink(_ context.Context, f Frame) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, f)
	return nil
}

func (l *frameLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, f := range l.frames {
		out = append(out, strings.TrimSpace(f.Dir+" "+f.Kind+" "+f.Method))
	}
	return out
}

func (l *frameLog) find(kind string) *Frame {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.frames {
		if l.frames[i].Kind == kind {
			return &l.frames[i]
		}
	}
	return nil
}

func TestStdio_DemoServerCallAndCleanEnd(t *testing.T) {
	c := stdioClient(t, "demo", func(cfg *Config) {
		cfg.Env["API_KEY"] = EnvValue{Ref: SecretRef{Env: "TEST_KEY"}}
		cfg.Policy.EnvironmentAllowlist = []string{"TEST_KEY"}
		cfg.Getenv = func(k string) string {
			return map[string]string{"TEST_KEY": "s3cret-value-123", "PATH": "/usr/bin:/bin", "HOME": "/home/x", "AGENT_LEAK": "no"}[k]
		}
	})
	var log frameLog
	ctx := context.Background()
	s, err := c.Connect(ctx, log.sink)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	cat, err := s.ListTools(ctx, log.sink)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cat.Find("echo"); !ok {
		t.Fatalf("no echo tool in %d tools", len(cat.Tools))
	}
	res, err := s.CallTool(ctx, CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"message":"hi s3cret-value-123"}`)}, log.sink)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res.StructuredContent); got != `{"message":"hi [REDACTED]"}` {
		t.Errorf("structuredContent = %s", got)
	}
	res, err = s.CallTool(ctx, CallRequest{Tool: "analyze", Arguments: json.RawMessage(`{"text":"a b c","steps":3}`)}, log.sink)
	if err != nil || res.IsError {
		t.Fatalf("analyze: %v %v", err, res)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(log.lines(), "\n")
	want := strings.Join([]string{
		"local process", "out request initialize", "in response", "out notification notifications/initialized",
		"out request tools/list", "in response",
		"out request tools/call", "in response",
		"out request tools/call", "in notification notifications/progress", "in notification notifications/progress", "in notification notifications/progress", "in response",
		"local process_exit"}, "\n")
	if got != want {
		t.Errorf("frames:\n%s\nwant:\n%s", got, want)
	}
	var info ProcessInfo
	if err := json.Unmarshal(log.find("process").Body, &info); err != nil {
		t.Fatal(err)
	}
	if strings.Join(info.Env, ",") != "AGENTCTL_STDIO_PEER,API_KEY,HOME,PATH" {
		t.Errorf("env names = %v, want the declared ones and the set base ones only", info.Env)
	}
	if info.PID <= 0 || info.Program != c.Program() {
		t.Errorf("process info = %+v", info)
	}
	var ex ProcessExit
	if err := json.Unmarshal(log.find("process_exit").Body, &ex); err != nil {
		t.Fatal(err)
	}
	if ex.ExitCode != 0 || ex.Stopped != "exit" {
		t.Errorf("exit = %+v, want a clean exit after stdin closed", ex)
	}
	for _, f := range log.frames {
		if strings.Contains(string(f.Body), "s3cret-value-123") {
			t.Errorf("secret in frame %s %s: %s", f.Dir, f.Kind, f.Body)
		}
	}
	if err := syscall.Kill(info.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server pid %d still exists after Close: %v", info.PID, err)
	}
}

func TestStdio_ServerRequestPingAndProgressRouted(t *testing.T) {
	c := stdioClient(t, "raw", nil)
	var log frameLog
	ctx := context.Background()
	s := connect(t, c, log.sink)
	if _, err := s.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	log = frameLog{}
	res, err := s.CallTool(ctx, CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"a":1}`)}, log.sink)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.StructuredContent) != `{"a":1}` {
		t.Errorf("result %s", res.StructuredContent)
	}
	want := "out request tools/call|in server_request ping|out response ping|in notification notifications/progress|in response"
	if got := strings.Join(log.lines(), "|"); got != want {
		t.Errorf("frames %s\nwant   %s", got, want)
	}
	if b := string(log.frames[2].Body); b != `{"jsonrpc":"2.0","id":"srv-1","result":{}}` {
		t.Errorf("ping answer %s", b)
	}
}

func TestStdio_DeathMidCallIsAmbiguousWithStderr(t *testing.T) {
	c := stdioClient(t, "raw", nil)
	ctx := context.Background()
	s := connect(t, c, nil)
	_, err := s.CallTool(ctx, CallRequest{Tool: "die"}, nil)
	e := asError(t, err)
	if e.Kind != KindTransportLoss || !e.Sent || !e.Ambiguous() {
		t.Fatalf("err = %v (kind %s sent %v), want an ambiguous transport_loss", err, e.Kind, e.Sent)
	}
	if !strings.Contains(err.Error(), "dying in the middle of a call") || !strings.Contains(err.Error(), "exit status 2") {
		t.Errorf("error lacks the stderr tail or the exit status: %v", err)
	}
	// The session is lost: the next request is refused unsent.
	_, err = s.CallTool(ctx, CallRequest{Tool: "echo"}, nil)
	if e := asError(t, err); e.Sent || e.Kind != KindSessionExpired {
		t.Errorf("call after death: %v (sent %v)", err, e.Sent)
	}
}

func TestStdio_TimeoutSendsCancelled(t *testing.T) {
	// The inactivity timeout bounds initialize too: long enough for a
	// race-built peer to start on a loaded machine.
	c := stdioClient(t, "raw", func(cfg *Config) { cfg.Timeout = 2 * time.Second; cfg.ShutdownGrace = 100 * time.Millisecond })
	var log frameLog
	s := connect(t, c, nil)
	_, err := s.CallTool(context.Background(), CallRequest{Tool: "hang"}, log.sink)
	if KindOf(err) != KindTimeout {
		t.Fatalf("err = %v, want timeout", err)
	}
	if got := strings.Join(log.lines(), "|"); got != "out request tools/call|out notification notifications/cancelled" {
		t.Errorf("frames %s", got)
	}
}

func TestStdio_BadPeers(t *testing.T) {
	for _, tc := range []struct {
		mode, want string
		kind       Kind
		timeout    time.Duration
	}{
		{"exit", "no configuration found", KindTransportLoss, 10 * time.Second},
		{"banner", "not a JSON-RPC message", KindMalformed, 10 * time.Second},
		{"silent", "inactivity timeout", KindTimeout, 300 * time.Millisecond},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			c := stdioClient(t, tc.mode, func(cfg *Config) { cfg.Timeout = tc.timeout; cfg.ShutdownGrace = 200 * time.Millisecond })
			var log frameLog
			_, err := c.Connect(context.Background(), log.sink)
			if KindOf(err) != tc.kind || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Connect: %v, want %s containing %q", err, tc.kind, tc.want)
			}
			if log.find("process_exit") == nil {
				t.Errorf("no process_exit frame: %v", log.lines())
			}
		})
	}
}

func TestStdio_MissingProgram(t *testing.T) {
	_, err := New(Config{Command: []string{"agentctl-no-such-program"}})
	if err == nil || !strings.Contains(err.Error(), `"agentctl-no-such-program"`) || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("New: %v", err)
	}
}

func TestStdio_StderrFloodDoesNotBlock(t *testing.T) {
	c := stdioClient(t, "flood", nil)
	var log frameLog
	ctx := context.Background()
	s, err := c.Connect(ctx, log.sink)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := s.CallTool(ctx, CallRequest{Tool: "echo", Arguments: json.RawMessage(`{"message":"x"}`)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var ex ProcessExit
	if err := json.Unmarshal(log.find("process_exit").Body, &ex); err != nil {
		t.Fatal(err)
	}
	if len(ex.StderrTail) > StderrTailBytes+8 || len(ex.StderrTail) < 1000 {
		t.Errorf("stderr tail of %d bytes, want bounded by %d", len(ex.StderrTail), StderrTailBytes)
	}
}

func TestStdio_KillRecordedMatchesStartTime(t *testing.T) {
	c := stdioClient(t, "silent", nil)
	var log frameLog
	s := &Session{c: c}
	if err := s.start(context.Background(), log.sink); err != nil {
		t.Fatal(err)
	}
	defer s.proc.stop(0)
	pid, st := s.proc.pid, s.proc.startTime
	if st == 0 {
		t.Fatal("no start time recorded")
	}
	if ok, err := KillRecorded(pid, st+1); ok || err != nil { // another process's start time: a reused pid
		t.Fatalf("KillRecorded with a wrong start time signalled: %v %v", ok, err)
	}
	if syscall.Kill(pid, 0) != nil {
		t.Fatal("the server died without a matching start time")
	}
	if ok, err := KillRecorded(pid, st); !ok || err != nil {
		t.Fatalf("KillRecorded: %v %v", ok, err)
	}
	<-s.proc.exited
	if ex := s.proc.stop(0); ex.Signal != "killed" {
		t.Errorf("exit = %+v, want killed by SIGKILL", ex)
	}
}
