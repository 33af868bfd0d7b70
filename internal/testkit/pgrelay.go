package testkit

import (
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// PGRelay sits between agentctl and the test PostgreSQL server on
// 127.0.0.1 and counts the client's round trips: each Sync (the end of an
// extended-protocol pipeline) and each simple Query is one wait for the
// server. Tests and benchmarks use it to hold the append path to its
// number of round trips, which a busy machine's timings cannot show.
type PGRelay struct {
	ln      net.Listener
	trips   atomic.Int64
	stmts   atomic.Int64
	commits atomic.Int64
	conns   atomic.Int64
	wg      sync.WaitGroup
}

// RoundTrips is the number of Sync and Query messages relayed so far.
func (r *PGRelay) RoundTrips() int64 { return r.trips.Load() }

// Statements is the number of statements executed so far: Bind messages
// (extended protocol) and simple Query messages.
func (r *PGRelay) Statements() int64 { return r.stmts.Load() }

// Commits is the number of transactions the server committed so far, as
// its answers show them: a COMMIT, or a write statement (INSERT, UPDATE,
// DELETE) run outside a transaction block, which commits on its own. A
// run's fixed cost is held to it (a lease claim and release are commits
// the events package does not count).
func (r *PGRelay) Commits() int64 { return r.commits.Load() }

// Connections is the number of connections relayed so far: server
// sessions opened, each paying the server's start (a process, the
// authentication) and its cold caches.
func (r *PGRelay) Connections() int64 { return r.conns.Load() }

// NewPGRelay starts a relay to dsn's host and returns it with a DSN that
// reaches the same database through it. It stops when tb ends.
func NewPGRelay(tb testing.TB, dsn string) (*PGRelay, string) {
	tb.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		tb.Fatalf("pgrelay: %v", err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgrelay: %v", err)
	}
	r := &PGRelay{ln: ln}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.conns.Add(1)
			r.wg.Add(2)
			go func() { defer r.wg.Done(); r.count(s, c); _ = s.Close() }()
			go func() { defer r.wg.Done(); r.answers(c, s); _ = c.Close() }()
		}
	}()
	tb.Cleanup(func() { _ = ln.Close() })
	u.Host = ln.Addr().String()
	return r, u.String()
}

// count copies the client's messages to the server, counting Sync ('S')
// and Query ('Q'). The first message (startup) has no type byte.
func (r *PGRelay) count(dst io.Writer, src io.Reader) {
	var hdr [5]byte
	if _, err := io.ReadFull(src, hdr[:4]); err != nil {
		return
	}
	n := int64(binary.BigEndian.Uint32(hdr[:4]))
	if _, err := dst.Write(hdr[:4]); err != nil {
		return
	}
	if _, err := io.CopyN(dst, src, n-4); err != nil {
		return
	}
	for {
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		if hdr[0] == 'S' || hdr[0] == 'Q' {
			r.trips.Add(1)
		}
		if hdr[0] == 'B' || hdr[0] == 'Q' {
			r.stmts.Add(1)
		}
		if _, err := dst.Write(hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(hdr[1:]))
		if _, err := io.CopyN(dst, src, n-4); err != nil {
			return
		}
	}
}

// answers copies the server's messages to the client, counting the
// commits (Commits): CommandComplete ('C') tags, and ReadyForQuery ('Z')
// saying whether a transaction block is open.
func (r *PGRelay) answers(dst io.Writer, src io.Reader) {
	var hdr [5]byte
	inBlock := false
	for {
		if _, err := io.ReadFull(src, hdr[:]); err != nil {
			return
		}
		n := int64(binary.BigEndian.Uint32(hdr[1:]))
		if _, err := dst.Write(hdr[:]); err != nil {
			return
		}
		if hdr[0] != 'C' && hdr[0] != 'Z' {
			if _, err := io.CopyN(dst, src, n-4); err != nil {
				return
			}
			continue
		}
		body := make([]byte, n-4)
		if _, err := io.ReadFull(src, body); err != nil {
			return
		}
		if _, err := dst.Write(body); err != nil {
			return
		}
		if hdr[0] == 'Z' {
			inBlock = len(body) > 0 && body[0] != 'I'
			continue
		}
		tag := strings.TrimRight(string(body), "\x00")
		verb, _, _ := strings.Cut(tag, " ")
		switch verb {
		case "BEGIN":
			inBlock = true
		case "COMMIT":
			inBlock = false
			r.commits.Add(1)
		case "ROLLBACK":
			inBlock = false
		case "INSERT", "UPDATE", "DELETE", "MERGE":
			if !inBlock {
				r.commits.Add(1)
			}
		}
	}
}
