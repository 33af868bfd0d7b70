package transport

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/agentctl/agentctl/internal/canonjson"
	"github.com/agentctl/agentctl/internal/termtext"
)

// proc is one running stdio server: its pipes, the goroutine reading its
// stdout (one line at a time, each handed to the exchange it belongs to and
// acknowledged before the next is read: backpressure), the goroutine
// draining its stderr into a bounded tail, and the goroutine waiting for it.
type proc struct {
	cmd       *exec.Cmd
	pid       int
	startTime uint64
	stdin     *os.File
	stdout    *os.File
	maxLine   int64
	red       *redactor
	elicits   bool // the elicitation capability was declared

	wmu sync.Mutex // one message written at a time

	mu      sync.Mutex
	waiters []*waiter // in registration order; the oldest takes what no one else claims
	orphans []Frame   // messages that arrived while no exchange listened (bounded)
	dropped int       // orphans beyond the bound
	deadErr error     // why the session is lost (set before dead is closed)

	dead     chan struct{} // closed when stdout ended, the process exited, and its status is known
	exited   chan struct{} // closed when Wait returned
	exit     ProcessExit
	stopOnce sync.Once
	stopped  string

	errMu  sync.Mutex
	errBuf []byte // ring of the last StderrTailBytes of stderr
	errEnd chan struct{}
}

// maxOrphans bounds the messages kept while no exchange listens.
const maxOrphans = 64

// waiter is one exchange listening for its response (by id) and progress
// (by token).
type waiter struct {
	id    json.RawMessage
	token string
	in    chan incoming
	done  chan struct{}
}

// incoming is one stdout line for an exchange; ack is closed when the
// exchange has handed it to its sink (the reader waits for that).
type incoming struct {
	line []byte
	msg  *message // nil when the line is not a JSON-RPC message
	err  error    // why not
	ack  chan struct{}
}

var errProcessGone = errors.New("stdio server is gone")

func startProc(spec *stdioSpec, env []string, maxLine int64, red *redactor, elicits bool) (*proc, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd := &exec.Cmd{Path: spec.path, Args: append([]string{spec.path}, spec.args...), Env: env, Dir: spec.dir,
		Stdin: inR, Stdout: outW, Stderr: errW, SysProcAttr: sysProcAttr()}
	err = cmd.Start()
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, fmt.Errorf("start %s: %w", spec.path, unwrapExecErr(err))
	}
	p := &proc{cmd: cmd, pid: cmd.Process.Pid, stdin: inW, stdout: outR, maxLine: maxLine, red: red, elicits: elicits,
		dead: make(chan struct{}), exited: make(chan struct{}), errEnd: make(chan struct{})}
	p.startTime, _ = ProcessStartTime(p.pid)
	go p.drainStderr(errR)
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	go p.readLoop(spec.grace)
	return p, nil
}

// drainStderr keeps the last StderrTailBytes of stderr; it never blocks
// the server.
func (p *proc) drainStderr(r *os.File) {
	defer close(p.errEnd)
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			p.errMu.Lock()
			p.errBuf = append(p.errBuf, buf[:n]...)
			if len(p.errBuf) > StderrTailBytes {
				p.errBuf = append(p.errBuf[:0], p.errBuf[len(p.errBuf)-StderrTailBytes:]...)
			}
			p.errMu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// tail returns the last n bytes of stderr, redacted and sanitized.
func (p *proc) tail(n int) string {
	p.errMu.Lock()
	b := string(p.errBuf)
	p.errMu.Unlock()
	s := p.red.string(b)
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return strings.TrimSpace(termtext.Block(strings.ToValidUTF8(s, "\uFFFD")))
}

// readLoop reads stdout line by line until it ends, then ends the process
// (it may still be alive: closing stdout is the end of the session too).
func (p *proc) readLoop(grace time.Duration) {
	br := bufio.NewReaderSize(p.stdout, 64<<10)
	for {
		line, err := readLine(br, p.maxLine)
		if errors.Is(err, errTooLarge) {
			p.route(incoming{line: line, err: fmt.Errorf("%w: a line of more than %d bytes", errTooLarge, p.maxLine)})
			continue
		}
		if err != nil {
			break
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		m, derr := decodeMessage(line)
		if derr != nil {
			derr = fmt.Errorf("%w (stdout line is not a JSON-RPC message)", derr)
		}
		p.route(incoming{line: line, msg: m, err: derr})
	}
	p.stdout.Close()
	reason := "closed its stdout"
	select {
	case <-p.exited:
		reason = "exited"
	default:
	}
	ex := p.stop(grace)
	p.mu.Lock()
	p.deadErr = fmt.Errorf("%w: it %s (%s)", errProcessGone, reason, describeExit(ex))
	p.mu.Unlock()
	close(p.dead)
}

func describeExit(ex ProcessExit) string {
	if ex.Signal != "" {
		return "killed by " + ex.Signal
	}
	return fmt.Sprintf("exit status %d", ex.ExitCode)
}

// readLine reads one line without its newline, at most max bytes; a longer
// line is consumed to its end and reported as errTooLarge (with its head).
func readLine(br *bufio.Reader, max int64) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		if int64(len(line)+len(frag)) <= max+1 {
			line = append(line, frag...)
		} else if line != nil || len(frag) > 0 {
			if int64(len(line)) < 256 {
				line = append(line, frag[:min(len(frag), 256)]...)
			}
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				return nil, err
			}
			return line, errTooLarge
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(line, []byte("\n")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(line) > 0:
			return line, nil // a last line without a newline
		default:
			return nil, err
		}
	}
}

// route hands a line to the exchange it belongs to and waits until that
// exchange has persisted it; a line nobody listens for is kept for the
// next exchange (a ping is answered at once).
func (p *proc) route(in incoming) {
	for {
		w := p.claim(in.msg)
		if w == nil {
			p.orphan(in)
			return
		}
		in.ack = make(chan struct{})
		select {
		case w.in <- in:
			<-in.ack
			return
		case <-w.done:
			// it stopped listening; try again (the next oldest, or an orphan)
		}
	}
}

// claim finds the waiter of m: the response's id, the progress token, or
// else the oldest waiter.
func (p *proc) claim(m *message) *waiter {
	p.mu.Lock()
	defer p.mu.Unlock()
	live := p.waiters[:0:0]
	for _, w := range p.waiters {
		select {
		case <-w.done:
		default:
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return nil
	}
	if m != nil && m.kind() == "response" {
		for _, w := range live {
			if sameID(w.id, m.ID) {
				return w
			}
		}
		return nil // a late response: no one asked for it any more
	}
	if m != nil && m.Method == methodProgress {
		var params struct {
			Token json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(m.Params, &params) == nil {
			var tok string
			if json.Unmarshal(params.Token, &tok) == nil {
				for _, w := range live {
					if w.token != "" && w.token == tok {
						return w
					}
				}
			}
		}
	}
	return live[0]
}

const methodProgress = "notifications/progress"

// orphan keeps a message no exchange took (bounded), answering a server
// request at once; the next exchange (or Close) records them.
func (p *proc) orphan(in incoming) {
	f := Frame{Dir: "in", Kind: "response", Body: jsonString(string(in.line))}
	if in.msg != nil {
		f = Frame{Dir: "in", Kind: in.msg.kind(), Method: in.msg.Method, ID: in.msg.ID, Body: in.msg.Raw}
	}
	frames := []Frame{f}
	if in.msg != nil && in.msg.kind() == "server_request" {
		body := replyTo(in.msg, p.elicits)
		frames = append(frames, Frame{Dir: "out", Kind: "response", Method: in.msg.Method, ID: in.msg.ID, Body: body})
		_ = p.write(context.Background(), body, serverRequestTimeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, f := range frames {
		if len(p.orphans) >= maxOrphans {
			p.dropped++
			continue
		}
		f.Body = json.RawMessage(bytes.Clone(f.Body))
		p.orphans = append(p.orphans, f)
	}
}

// replyTo is our answer to a server request no call took: {} for ping, a
// decline for elicitation/create when elicits (the capability is declared;
// no call's policy applies), else -32601.
func replyTo(m *message, elicits bool) []byte {
	reply := wireResponse{JSONRPC: "2.0", ID: m.ID}
	switch {
	case m.Method == "ping":
		reply.Result = json.RawMessage(`{}`)
	case m.Method == methodElicitationCreate && elicits:
		reply.Result = json.RawMessage(`{"action":"decline"}`)
	default:
		reply.Error = &rpcError{Code: codeMethodNotFound, Message: msgNoCapabilities}
	}
	body, _ := canonjson.Marshal(reply)
	return body
}

func (p *proc) takeOrphans() []Frame {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.orphans
	p.orphans = nil
	return o
}

func (p *proc) register(id json.RawMessage, token string) *waiter {
	w := &waiter{id: id, token: token, in: make(chan incoming), done: make(chan struct{})}
	p.mu.Lock()
	p.waiters = append(p.waiters, w)
	p.mu.Unlock()
	return w
}

func (p *proc) unregister(w *waiter) {
	close(w.done)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, o := range p.waiters {
		if o == w {
			p.waiters = append(p.waiters[:i:i], p.waiters[i+1:]...)
			return
		}
	}
}

// lost returns why the session is lost, or nil while it lives.
func (p *proc) lost() error {
	select {
	case <-p.dead:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.deadErr
	default:
		return nil
	}
}

// write sends one message and its newline, bounded by ctx and d (0: no
// bound but ctx). A write cut short leaves the stream unusable: the
// process is stopped.
func (p *proc) write(ctx context.Context, body []byte, d time.Duration) error {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	stop := context.AfterFunc(ctx, func() { _ = p.stdin.SetWriteDeadline(time.Now()) })
	defer func() {
		if stop() {
			return
		}
		_ = p.stdin.SetWriteDeadline(time.Time{})
	}()
	msg := make([]byte, 0, len(body)+1)
	msg = append(append(msg, body...), '\n')
	if _, err := p.stdin.Write(msg); err != nil {
		go p.stop(0)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("%w: write to its stdin: %w", errProcessGone, err)
	}
	return nil
}

// stop ends the process once: close stdin, wait grace, SIGTERM to the
// process group, wait grace, SIGKILL to the group; then SIGKILL to what is
// left of the group (a wrapper's children). It returns how it ended.
func (p *proc) stop(grace time.Duration) ProcessExit {
	p.stopOnce.Do(func() {
		p.wmu.Lock() // no message is cut by the close
		_ = p.stdin.Close()
		p.wmu.Unlock()
		p.stopped = "exit"
		if !p.waitExit(grace) {
			p.stopped = "sigterm"
			signalGroup(p.cmd.Process, false)
			if !p.waitExit(grace) {
				p.stopped = "sigkill"
				signalGroup(p.cmd.Process, true)
				<-p.exited
			}
		}
		signalGroup(p.cmd.Process, true) // stragglers of the group, if any
		select {                         // stderr ends when its last writer does (a child may hold it)
		case <-p.errEnd:
		case <-time.After(200 * time.Millisecond):
		}
		p.exit = p.exitOf()
	})
	<-p.exited
	return p.exit
}

func (p *proc) waitExit(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-p.exited:
		return true
	case <-t.C:
		return false
	}
}

func (p *proc) exitOf() ProcessExit {
	ex := ProcessExit{PID: p.pid, ExitCode: -1, Stopped: p.stopped, StderrTail: p.tail(StderrTailBytes)}
	if st := p.cmd.ProcessState; st != nil {
		ex.ExitCode = st.ExitCode()
		ex.Signal = exitSignal(st)
	}
	p.mu.Lock()
	ex.Dropped = p.dropped
	p.mu.Unlock()
	return ex
}

// jsonString is s as a JSON string.
func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}
