package events

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// On PostgreSQL every statement sent on its own is a network round trip,
// and a durable call's commits hold a dozen statements (the fence, the
// event rows, the projection writes): sent one by one they cost more than
// the commits themselves (BENCHMARKS.md, PostgreSQL). An append
// transaction therefore queues its writes and sends them as one pgx batch
// (one round trip, pipelined) when it needs an answer: at COMMIT and
// before a read. A lone append (BEGIN, lease, rows, projections, COMMIT)
// is one round trip, and so is a group of n members, each in a savepoint:
// a member whose statement fails aborts the transaction, which is rolled
// back whole; that member keeps its error and the others run again in a
// new one (groupcommit.go), each statement tagged with its member.
//
// Nothing changes in what is decided: the fence is the events trigger's
// (migration 0012), so a lost lease aborts the transaction before its
// COMMIT runs; PostgreSQL skips every statement after a failing one, so
// nothing commits unless every statement of every committed member ran;
// and a statement's error reaches the append that queued it, with its
// wrapping.

// pgPipe is the queue of one PostgreSQL append transaction. It holds the
// raw pgx connection for the transaction's life (inside sql.Conn.Raw).
type pgPipe struct {
	conn  *pgx.Conn
	batch *pgx.Batch // what is queued; a sent batch is never touched again (its results read it)
	items []pipeItem
	open  bool // BEGIN sent or queued; COMMIT/ROLLBACK not yet sent
	// flushes counts batches sent, so that a mark knows whether what it
	// marked is still queued.
	flushes int
	// owner tags what is queued now with the group-commit member it
	// belongs to (its index in the batch; -1: the transaction's own);
	// blame is the owner of the statement that failed the last failed
	// flush, and failure its shaped error.
	owner   int
	blame   int
	failure error
}

// pipeMark is a point in a transaction's queue (Tx.mark).
type pipeMark struct{ flushes, items int }

// statementHead names a statement in an error by its first words.
func statementHead(q string) string {
	const n = 40
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > n {
		return q[:n] + "…"
	}
	return q
}

// pipeItem is one queued statement; wrap, if set, shapes its error when
// the batch is flushed.
type pipeItem struct {
	query string
	wrap  func(error) error
	owner int
}

// Row is the one-row result a transaction's query hands its caller: a
// *sql.Row on SQLite, pgx's row on a PostgreSQL append (ErrNoRows is
// sql.ErrNoRows on both).
type Row interface {
	Scan(dest ...any) error
}

type pgRow struct{ pgx.Row }

func (r pgRow) Scan(dest ...any) error {
	if err := r.Row.Scan(dest...); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return sql.ErrNoRows
		}
		return err
	}
	return nil
}

// queue adds one statement to the next batch.
func (p *pgPipe) queue(query string, args []any, wrap func(error) error) {
	if p.batch == nil {
		p.batch = &pgx.Batch{}
	}
	p.batch.Queue(query, args...)
	p.items = append(p.items, pipeItem{query: query, wrap: wrap, owner: p.owner})
}

// flush sends what is queued in one round trip and reads every result in
// order. The first failing statement's error is returned (shaped by its
// wrap); PostgreSQL skips the statements after it, and the transaction is
// then aborted until a ROLLBACK (TO SAVEPOINT).
func (p *pgPipe) flush(ctx context.Context) error {
	if len(p.items) == 0 {
		return nil
	}
	items, b := p.items, p.batch
	p.batch, p.items = nil, nil
	br := p.conn.SendBatch(ctx, b)
	p.flushes++
	var first error
	for _, it := range items {
		tag, err := br.Exec()
		if err == nil && it.query == "COMMIT" && tag.String() != "COMMIT" {
			// PostgreSQL answers COMMIT of an aborted transaction with
			// ROLLBACK and no error.
			err = fmt.Errorf("the transaction was rolled back (%s)", tag)
		}
		if err != nil {
			if it.wrap != nil {
				err = it.wrap(err)
			} else {
				err = &Error{Op: "statement " + statementHead(it.query), Err: classify(err)}
			}
			first = err
			p.blame, p.failure = it.owner, err
			break
		}
	}
	if err := br.Close(); err != nil && first == nil {
		first = err
	}
	return first
}

// mark is the point after which a group-commit member's statements are
// queued; discardSince drops those not yet sent when the member fails
// before its flush, so that its fence or rows are not sent with (and
// blamed on) the next member. Both do nothing on SQLite.
func (t *Tx) mark() pipeMark {
	if t.pipe == nil {
		return pipeMark{}
	}
	return pipeMark{flushes: t.pipe.flushes, items: len(t.pipe.items)}
}

func (t *Tx) discardSince(m pipeMark) {
	p := t.pipe
	if p == nil {
		return
	}
	n := 0 // everything queued since the last flush is the member's
	if p.flushes == m.flushes {
		n = m.items
	}
	p.items = p.items[:n]
	if p.batch != nil {
		p.batch.QueuedQueries = p.batch.QueuedQueries[:n]
	}
}

// pipedResult is what a queued Exec returns: its outcome is not known
// before the flush.
type pipedResult struct{}

func (pipedResult) LastInsertId() (int64, error) {
	return 0, errors.New("events: a queued statement has no insert id")
}

func (pipedResult) RowsAffected() (int64, error) {
	return 0, errors.New("events: a queued statement's row count is not known before the flush")
}

// withPipe runs fn with a pipelined transaction on one raw connection of
// the pool. A transaction fn leaves open is rolled back; a connection left
// in any state but idle is closed rather than returned to the pool.
func (db *DB) withPipe(ctx context.Context, fn func(tx *Tx)) error {
	conn, err := db.x.Conn(ctx)
	if err != nil {
		return &Error{Op: "begin", Path: db.path, Err: classify(err)}
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("events: PostgreSQL connection is a %T, not pgx's", dc)
		}
		p := &pgPipe{conn: sc.Conn(), owner: -1, blame: -1}
		tx := &Tx{db: db, pipe: p}
		p.queue("BEGIN", nil, nil)
		p.open = true
		fn(tx)
		if p.open {
			_ = tx.Rollback()
		}
		if st := p.conn.PgConn().TxStatus(); st != 'I' || p.conn.IsClosed() {
			_ = p.conn.Close(ctx)
			return driver.ErrBadConn // discard it: never hand on a connection inside a transaction
		}
		return nil
	})
}

// commitPipe sends COMMIT with whatever is still queued: a single-member
// append's whole transaction is then one round trip. A statement that
// fails aborts the transaction before the COMMIT runs; its error (shaped
// by its wrap) is returned and the transaction rolled back.
func (t *Tx) commitPipe() error {
	p := t.pipe
	if !p.open {
		return sql.ErrTxDone
	}
	p.queue("COMMIT", nil, func(err error) error {
		return &Error{Op: "append: commit", Path: t.db.path, Err: classify(err)}
	})
	p.open = false
	err := p.flush(context.Background())
	if err != nil && !p.conn.IsClosed() && p.conn.PgConn().TxStatus() != 'I' {
		_ = p.simple(context.Background(), "ROLLBACK")
	}
	return err
}

// own tags the statements queued from now on with member i of a group
// commit (-1: the transaction's own); nothing on SQLite.
func (t *Tx) own(i int) {
	if t.pipe != nil {
		t.pipe.owner = i
	}
}

// blamed returns the member whose statement failed the pipelined
// transaction, and that statement's error (-1 when none did: BEGIN,
// COMMIT or the connection failed, or on SQLite).
func (t *Tx) blamed() (int, error) {
	if t.pipe == nil {
		return -1, nil
	}
	return t.pipe.blame, t.pipe.failure
}

// aborted reports a pipelined transaction the server aborted (a statement
// failed: until a rollback it refuses everything else) or whose
// connection is gone.
func (t *Tx) aborted() bool {
	if t.pipe == nil {
		return false
	}
	return t.pipe.conn.IsClosed() || t.pipe.conn.PgConn().TxStatus() == 'E'
}

// simple runs sql alone on the simple query protocol, with nothing queued
// before it. Rollbacks go this way: pgx's batches prepare their statements,
// which an aborted transaction refuses, and a failed batch leaves its
// statements to be prepared again once the transaction has ended.
func (p *pgPipe) simple(ctx context.Context, sql string) error {
	_, err := p.conn.PgConn().Exec(ctx, sql).ReadAll()
	return err
}

// rollbackPipe drops what is queued and rolls the transaction back.
func (t *Tx) rollbackPipe() error {
	p := t.pipe
	if !p.open {
		return sql.ErrTxDone
	}
	p.open = false
	unsent := len(p.items) > 0 && p.items[0].query == "BEGIN" // nothing reached the server
	p.batch, p.items = nil, nil
	if unsent {
		return nil
	}
	return p.simple(context.Background(), "ROLLBACK")
}
