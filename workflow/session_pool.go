package workflow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/agentctl/agentctl/events"
	"github.com/agentctl/agentctl/events/vocab"
	"github.com/agentctl/agentctl/transport"
)

// SessionPool lets the runs of one process (a worker's) share their MCP
// sessions, and the tool catalog listed on them, instead of each run
// paying initialize, notifications/initialized and tools/list.
//
// A session is shared only between runs whose remote has the same
// identity: endpoint URL, protocol pin, network policy, user agent,
// timeouts, and the digest of its resolved header values (credentials).
// Remotes with an OAuth auth block, stdio servers, runs with telemetry
// and runs with a Dialer other than NetworkDialer are never pooled: their
// session carries per-run state (the run that records auth steps, a
// process, a trace context, the caller's transport).
//
// The run that opens a session records it in full, as without a pool.
// A run that borrows it records session.opened with borrowedFrom (the
// opening run and generation) and its own generation number, then a copy
// of session.catalog: its log stands alone for inspect, replay and
// resume whatever becomes of the opening run. A session any run finds
// expired, or whose call ended ambiguously, leaves the pool (retire); a
// notifications/tools/list_changed does too. At 2026-07-28 the catalog is
// listed again, in the borrowing run's log, once its ttlMs has passed.
type SessionPool struct {
	// Now is the clock catalog ttls and idle times are measured with;
	// nil = time.Now.
	Now func() time.Time
	// MaxIdle bounds how long a session no run uses stays borrowable; 0
	// means DefaultMaxIdle. An older one is closed and the next run opens
	// a new one: a server is likelier to have forgotten it, and a call
	// answered 404 is ambiguous (an at_most_once call would end uncertain).
	MaxIdle time.Duration

	mu      sync.Mutex
	entries map[string]*pooledSession
	closed  bool
}

// DefaultMaxIdle is SessionPool.MaxIdle's default.
const DefaultMaxIdle = 30 * time.Second

// NewSessionPool returns an empty pool (as does the zero SessionPool).
func NewSessionPool() *SessionPool {
	return &SessionPool{entries: map[string]*pooledSession{}}
}

// pooledSession is one shared session. The fields after ready are set
// once by the run that opens it, before ready is closed; catalog, tools,
// digest and fresh change under the pool's mu.
type pooledSession struct {
	pool  *SessionPool
	key   string
	ready chan struct{}
	users int       // runs holding it (guarded by pool.mu)
	idle  time.Time // when users last fell to 0 (guarded by pool.mu)
	dead  bool      // retired, or the pool closed: closed once unused

	sess    Session
	info    SessionInfo
	origin  vocab.SessionOrigin
	catalog *transport.Catalog
	tools   []vocab.ToolInfo
	digest  string
	// fresh is when a 2026-07-28 catalog must be listed again (its ttlMs);
	// zero: it lives as long as the session (2025-11-25).
	fresh time.Time
	ttl   bool
}

func (p *SessionPool) maxIdle() time.Duration {
	if p.MaxIdle > 0 {
		return p.MaxIdle
	}
	return DefaultMaxIdle
}

func (p *SessionPool) now() time.Time {
	if p.Now != nil {
		return p.Now()
	}
	return time.Now()
}

// acquire returns the live session of key, counted as used; or, when
// there is none, a new entry that the caller must open and then fill or
// abandon (opener). Runs that ask while one opens wait for it. A closed
// pool returns nil.
func (p *SessionPool) acquire(ctx context.Context, key string) (e *pooledSession, opener bool, err error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, false, nil
		}
		if p.entries == nil {
			p.entries = map[string]*pooledSession{} // the zero pool is ready to use
		}
		e = p.entries[key]
		if e == nil {
			e = &pooledSession{pool: p, key: key, ready: make(chan struct{}), users: 1}
			p.entries[key] = e
			p.mu.Unlock()
			return e, true, nil
		}
		if e.sess != nil && e.users == 0 && p.now().Sub(e.idle) > p.maxIdle() {
			delete(p.entries, key) // idle too long: close it, open anew
			e.dead = true
			p.mu.Unlock()
			_ = e.sess.Close(context.Background())
			continue
		}
		if e.sess != nil {
			e.users++
			p.mu.Unlock()
			return e, false, nil
		}
		ready := e.ready
		p.mu.Unlock()
		select {
		case <-ready:
		case <-ctx.Done():
			return nil, false, fmt.Errorf("waiting for a pooled session: %w", ctx.Err())
		}
	}
}

// fill makes the session rs that the run opened for e available to others.
func (e *pooledSession) fill(runID string, rs *remoteState) {
	p := e.pool
	ts, _ := rs.sess.(TaskSession)
	p.mu.Lock()
	e.sess, e.info = rs.sess, rs.sess.Info()
	e.origin = vocab.SessionOrigin{RunID: runID, Generation: rs.gen, ToolCallTasks: ts != nil && ts.ToolCallTasks()}
	e.setCatalog(rs.catalog)
	rs.pool = e
	p.mu.Unlock()
	close(e.ready)
}

// abandon drops e after its opener failed: the next run opens anew.
func (e *pooledSession) abandon() {
	p := e.pool
	p.mu.Lock()
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
	p.mu.Unlock()
	close(e.ready)
}

// setCatalog keeps cat as the session's catalog (pool.mu held).
func (e *pooledSession) setCatalog(cat *transport.Catalog) {
	e.catalog, e.tools, e.digest = cat, toolInfos(cat), cat.Digest()
	e.ttl = e.info.ProtocolVersion == transport.Protocol20260728
	if e.ttl {
		e.fresh = e.pool.now().Add(cat.TTL)
	}
}

// retire takes e out of the pool: no run borrows it again; it is closed
// once the runs using it end.
func (e *pooledSession) retire() {
	p := e.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	e.dead = true
	if p.entries[e.key] == e {
		delete(p.entries, e.key)
	}
}

// release is the end of one run's use of e.
func (e *pooledSession) release() {
	p := e.pool
	p.mu.Lock()
	e.users--
	if e.users == 0 {
		e.idle = p.now()
	}
	closing := e.users == 0 && e.dead && e.sess != nil
	p.mu.Unlock()
	if closing {
		_ = e.sess.Close(context.Background())
	}
}

// Close retires every session; those no run uses are closed now, the
// others when their runs end. Runs that start later open their own.
func (p *SessionPool) Close() {
	p.mu.Lock()
	p.closed = true
	var idle []Session
	for k, e := range p.entries {
		delete(p.entries, k)
		e.dead = true
		if e.users == 0 && e.sess != nil {
			idle = append(idle, e.sess)
		}
	}
	p.mu.Unlock()
	for _, s := range idle {
		_ = s.Close(context.Background())
	}
}

// poolRefused retires rs from its pool when a call on it was refused by
// HTTP status (a server that answers 400, not 404, for a session it
// forgot): the run goes on by the rules, later runs open a new session.
func (rs *remoteState) poolRefused(err error) {
	if rs.pool != nil && transport.KindOf(err) == transport.KindHTTPStatus {
		rs.pool.retire()
	}
}

// poolOpening marks the context of a run opening a session for the pool.
type poolOpening struct{}

// fromPool is openWith for a run that may share sessions (Runner.Sessions):
// it borrows the pool's session with remote, or opens one and offers it.
// ok is false when the run does not pool this remote (then openWith opens
// as without a pool): a replay, a resume, a task poll, or a remote whose
// identity is not poolable (poolKey).
func (rn *run) fromPool(ctx context.Context, remote, taskID string, attempt int, deferCatalog, taskPoll bool) (rs *remoteState, ok bool, err error) {
	p := rn.r.Sessions
	if p == nil || taskPoll || rn.replay || rn.log != nil || ctx.Value(poolOpening{}) != nil {
		return nil, false, nil
	}
	key, ok := rn.poolKey(remote)
	if !ok {
		return nil, false, nil
	}
	for {
		e, opener, err := p.acquire(ctx, key)
		switch {
		case err != nil:
			return nil, true, err
		case e == nil:
			return nil, false, nil // the pool is closed
		case opener:
			rs, err := rn.openWith(context.WithValue(ctx, poolOpening{}, true), remote, taskID, attempt, deferCatalog, false)
			if err != nil {
				e.abandon()
				return nil, true, err
			}
			e.fill(rn.id, rs)
			return rs, true, nil
		}
		if ts, _ := e.sess.(TaskSession); ts != nil && ts.ToolsChanged() {
			// notifications/tools/list_changed: the catalog is stale for
			// every run; this one opens the next session.
			e.retire()
			e.release()
			continue
		}
		rs, err := rn.borrow(ctx, e, remote, taskID, attempt, deferCatalog)
		return rs, true, err
	}
}

// borrow makes the pool's session e this run's next generation with
// remote: session.opened (borrowedFrom) and a copy of session.catalog are
// recorded as openWith records them, with no frame sent. A 2026-07-28
// catalog past its ttlMs is listed again first, its frames in this run.
func (rn *run) borrow(ctx context.Context, e *pooledSession, remote, taskID string, attempt int, deferCatalog bool) (*remoteState, error) {
	rn.mu.Lock()
	rn.gens[remote]++
	gen := rn.gens[remote]
	rs := &remoteState{name: remote, sess: e.sess, gen: gen, owner: taskID, attempt: attempt, attached: map[string]bool{}, pool: e}
	rn.opened = append(rn.opened, rs)
	rn.mu.Unlock()
	origin := e.origin
	opened := vocab.SessionOpened{Remote: remote, URL: rn.wf.Spec.MCPServers[remote].Endpoint(), Generation: gen, TaskID: taskID,
		ProtocolVersion: e.info.ProtocolVersion, ServerInfo: e.info.ServerInfo, SessionIDDigest: e.info.IDDigest, BorrowedFrom: &origin}
	stream := sessionStream(remote, gen)
	rn.later(events.Record{Stream: stream, Type: vocab.TypeSessionOpened, Payload: opened})
	p := e.pool
	p.mu.Lock()
	cat, tools, digest, stale := e.catalog, e.tools, e.digest, e.ttl && !p.now().Before(e.fresh)
	p.mu.Unlock()
	if stale {
		base := vocab.Frame{Remote: remote, Generation: gen, TaskID: taskID, Attempt: attempt}
		c, err := e.sess.ListTools(ctx, rn.sink(stream, base))
		if err != nil {
			e.retire()
			return nil, err
		}
		p.mu.Lock()
		e.setCatalog(c)
		cat, tools, digest = e.catalog, e.tools, e.digest
		p.mu.Unlock()
	}
	rec := vocab.SessionCatalog{Remote: remote, Generation: gen, TaskID: taskID, CatalogDigest: digest, Tools: rn.recordedTools(remote, tools), Warnings: cat.Warnings}
	if err := rn.recordCatalog(rs, events.Record{Stream: stream, Type: vocab.TypeSessionCatalog, Payload: rec}, deferCatalog); err != nil {
		return nil, err
	}
	rs.catalog = cat
	rn.mu.Lock()
	rn.remotes[remote] = rs
	rn.mu.Unlock()
	return rs, nil
}

// toolInfos is a catalog's tools as session.catalog records them.
func toolInfos(cat *transport.Catalog) []vocab.ToolInfo {
	out := make([]vocab.ToolInfo, 0, len(cat.Tools))
	for _, t := range cat.Tools {
		out = append(out, vocab.ToolInfo{Name: t.Name, Digest: t.Digest(), Title: t.Title, Description: t.Description,
			InputSchema: t.InputSchema, OutputSchema: t.OutputSchema, Annotations: t.Annotations, Execution: t.Execution})
	}
	return out
}

// poolKey is the identity of remote's sessions, which the runs sharing
// one must have in common; ok is false when remote is not pooled. The
// resolved header values (credentials) enter only as a digest.
func (rn *run) poolKey(remote string) (key string, ok bool) {
	if rn.r.TraceContext != nil {
		return "", false
	}
	if d := rn.r.Dialer; d != nil {
		if _, network := d.(NetworkDialer); !network {
			return "", false // a dialer of the caller's: its sessions are its own
		}
	}
	cfg := rn.wf.TransportConfig(remote)
	if len(cfg.Command) > 0 || cfg.HTTPClient != nil || cfg.Policy.Resolver != nil {
		return "", false
	}
	if _, oauth, err := OAuthConfig(rn.wf, remote, rn.r.Getenv); oauth || err != nil {
		return "", false
	}
	// The identity, each part self-delimiting (quoted strings, lists
	// counted), hashed: a key says nothing of the header values. Built by
	// appends, not fmt: every run of a worker computes it.
	pol := cfg.Policy
	b := make([]byte, 0, 512)
	b = appendQuoted(b, cfg.URL, cfg.ProtocolVersion, rn.r.UserAgent)
	b = appendInts(b, int64(cfg.Timeout), int64(cfg.MaxDuration), int64(pol.ConnectTimeout), pol.MaxResponseBytes, int64(len(pol.AllowedPorts)))
	for _, p := range pol.AllowedPorts {
		b = appendInts(b, int64(p))
	}
	b = strconv.AppendBool(b, cfg.Elicitation)
	b = strconv.AppendBool(append(b, ' '), cfg.TasksExtension)
	b = strconv.AppendBool(append(b, ' '), pol.AllowPrivate)
	for _, l := range [][]string{pol.NetworkAllowlist, pol.AllowedSchemes, pol.EnvironmentAllowlist, pol.SecretFileRoots} {
		b = appendInts(b, int64(len(l)))
		b = appendQuoted(b, l...)
	}
	names := make([]string, 0, len(cfg.Headers))
	for n := range cfg.Headers {
		names = append(names, n)
	}
	slices.Sort(names)
	b = appendInts(b, int64(len(names)))
	for _, n := range names {
		v, err := cfg.Headers[n].Resolve(cfg.Policy, rn.r.Getenv)
		if err != nil {
			return "", false // the run's own open reports it
		}
		b = appendQuoted(b, n, v)
	}
	sum := sha256.Sum256(b)
	clear(b) // it held the header values
	return hex.EncodeToString(sum[:]), true
}

// appendQuoted appends each of ss to b, Go-quoted, after a space.
func appendQuoted(b []byte, ss ...string) []byte {
	for _, s := range ss {
		b = strconv.AppendQuote(append(b, ' '), s)
	}
	return b
}

// appendInts appends each of ns to b, in decimal, after a space.
func appendInts(b []byte, ns ...int64) []byte {
	for _, n := range ns {
		b = strconv.AppendInt(append(b, ' '), n, 10)
	}
	return b
}
