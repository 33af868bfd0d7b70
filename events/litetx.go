//go:build cgo

package events

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/mattn/go-sqlite3"
)

// The SQLite append path runs on one connection of its own, through the
// driver directly (as the PostgreSQL path runs on pgx: pgpipe.go).
// database/sql costs a call's commit a goroutine per transaction (its
// context watcher) and per query, a statement bound to the transaction
// per query and a lock per call; on two cores those wake-ups and the
// kernel's thread switches were a large share of a durable call
// (BENCHMARKS.md, session 7). The writer's statements are prepared once
// on that connection and kept.

// liteWriter is the SQLite writer's connection and its statements; used
// only by the group-commit leader, under DB.wmu.
type liteWriter struct {
	conn  *sql.Conn
	stmts map[string]driver.Stmt
	nv    []driver.NamedValue // bind's arguments, reused: the driver keeps none after a statement
}

// liteTx is one append transaction on the writer's raw connection.
type liteTx struct {
	w    *liteWriter
	c    *sqlite3.SQLiteConn
	open bool
}

// withLite runs fn with a transaction (BEGIN IMMEDIATE) on the writer's
// connection. A transaction fn leaves open is rolled back; a connection
// that cannot be brought back out of a transaction is discarded.
func (db *DB) withLite(ctx context.Context, fn func(tx *Tx)) error {
	if db.lite == nil {
		conn, err := db.x.Conn(ctx)
		if err != nil {
			return &Error{Op: "begin", Path: db.path, Err: classify(err)}
		}
		db.lite = &liteWriter{conn: conn, stmts: map[string]driver.Stmt{}}
	}
	w := db.lite
	ran := false
	err := w.conn.Raw(func(dc any) error {
		c, ok := dc.(*sqlite3.SQLiteConn)
		if !ok {
			return fmt.Errorf("events: SQLite connection is a %T, not go-sqlite3's", dc)
		}
		lt := &liteTx{w: w, c: c}
		if _, err := lt.exec(ctx, "BEGIN IMMEDIATE", nil); err != nil {
			return &Error{Op: "begin", Path: db.path, Err: classify(err)}
		}
		lt.open = true
		ran = true
		fn(&Tx{db: db, lite: lt})
		if lt.open {
			_ = lt.rollback()
		}
		if !c.AutoCommit() {
			return driver.ErrBadConn // never keep a connection inside a transaction
		}
		return nil
	})
	if err != nil && ran {
		db.closeLite() // the next batch opens another connection
		return nil     // fn ran: the members hold their outcomes
	}
	if errors.Is(err, driver.ErrBadConn) {
		db.closeLite()
	}
	return err
}

// closeLite closes the writer's statements and gives its connection back.
func (db *DB) closeLite() {
	w := db.lite
	if w == nil {
		return
	}
	db.lite = nil
	_ = w.conn.Raw(func(any) error {
		for _, st := range w.stmts {
			_ = st.Close()
		}
		return nil
	})
	_ = w.conn.Close()
}

// stmt is query prepared on the writer's connection, once.
func (lt *liteTx) stmt(query string) (driver.Stmt, error) {
	if st, ok := lt.w.stmts[query]; ok {
		return st, nil
	}
	st, err := lt.c.Prepare(query)
	if err != nil {
		return nil, err
	}
	lt.w.stmts[query] = st
	return st, nil
}

// namedValues converts args as database/sql does for a driver without a
// converter of its own (go-sqlite3 binds int64, float64, bool, []byte,
// string, time.Time and nil).
func namedValues(nv []driver.NamedValue, args []any) ([]driver.NamedValue, error) {
	nv = slices.Grow(nv[:0], len(args))[:len(args)]
	for i, a := range args {
		if v, ok := a.(driver.Valuer); ok {
			var err error
			if a, err = v.Value(); err != nil {
				return nil, fmt.Errorf("argument %d: %w", i+1, err)
			}
		}
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("argument %d: %w", i+1, err)
		}
		nv[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	return nv, nil
}

// bind is query's statement and args converted for it.
func (lt *liteTx) bind(query string, args []any) (driver.Stmt, []driver.NamedValue, error) {
	st, err := lt.stmt(query)
	if err != nil {
		return nil, nil, err
	}
	nv, err := namedValues(lt.w.nv, args)
	lt.w.nv = nv
	return st, nv, err
}

func (lt *liteTx) exec(ctx context.Context, query string, args []any) (sql.Result, error) {
	st, nv, err := lt.bind(query, args)
	if err != nil {
		return nil, err
	}
	defer clear(nv) // no payload kept alive by the scratch slice
	return st.(driver.StmtExecContext).ExecContext(ctx, nv)
}

// queryRow runs a single-row query; Scan reports sql.ErrNoRows as
// database/sql's Row does.
func (lt *liteTx) queryRow(ctx context.Context, query string, args []any) (Row, error) {
	st, nv, err := lt.bind(query, args)
	if err != nil {
		return nil, err
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, nv)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	switch err := rows.Next(vals); {
	case errors.Is(err, io.EOF):
		return liteRow{err: sql.ErrNoRows}, nil
	case err != nil:
		return liteRow{err: err}, nil
	}
	return liteRow{vals: vals}, nil
}

func (lt *liteTx) commit() error {
	if !lt.open {
		return sql.ErrTxDone
	}
	lt.open = false
	if _, err := lt.exec(context.Background(), "COMMIT", nil); err != nil {
		if !lt.c.AutoCommit() {
			_, _ = lt.exec(context.Background(), "ROLLBACK", nil)
		}
		return err
	}
	return nil
}

func (lt *liteTx) rollback() error {
	if !lt.open {
		return sql.ErrTxDone
	}
	lt.open = false
	_, err := lt.exec(context.Background(), "ROLLBACK", nil)
	return err
}

// liteRow is one row read on the writer's connection.
type liteRow struct {
	vals []driver.Value
	err  error
}

// Scan assigns the row's values to dest: *string, *int64, *int, *[]byte,
// *any, or an sql.Scanner (sql.NullString and the like).
func (r liteRow) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	if len(dest) != len(r.vals) {
		return fmt.Errorf("events: scan: %d destinations for %d columns", len(dest), len(r.vals))
	}
	for i, d := range dest {
		v := r.vals[i]
		var err error
		switch d := d.(type) {
		case sql.Scanner:
			err = d.Scan(v)
		case *any:
			*d = v
		case *string:
			switch v := v.(type) {
			case string:
				*d = v
			case []byte:
				*d = string(v)
			default:
				err = fmt.Errorf("%T into *string", v)
			}
		case *[]byte:
			switch v := v.(type) {
			case []byte:
				*d = append([]byte(nil), v...)
			case string:
				*d = []byte(v)
			case nil:
				*d = nil
			default:
				err = fmt.Errorf("%T into *[]byte", v)
			}
		case *int64:
			n, ok := v.(int64)
			if !ok {
				err = fmt.Errorf("%T into *int64", v)
			}
			*d = n
		case *int:
			n, ok := v.(int64)
			if !ok {
				err = fmt.Errorf("%T into *int", v)
			}
			*d = int(n)
		default:
			err = fmt.Errorf("unsupported destination %T", d)
		}
		if err != nil {
			return fmt.Errorf("events: scan column %d: %w", i+1, err)
		}
	}
	return nil
}
