package migrations

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
)

// goStep is the part of a migration SQL cannot say; it runs after the
// migration's SQL, in its transaction.
type goStep func(ctx context.Context, tx *sql.Tx, b Backend) error

// goSteps are the Go steps by migration file name.
var goSteps = map[string]goStep{
	"0016_server_info_compact.sql": recompactServerInfo, // sqlite
	"0005_server_info_compact.sql": recompactServerInfo, // postgres
}

// runGoStep runs m's Go step, if it has one.
func runGoStep(ctx context.Context, tx *sql.Tx, b Backend, m Migration) error {
	step, ok := goSteps[m.Name]
	if !ok {
		return nil
	}
	if err := step(ctx, tx, b); err != nil {
		return fmt.Errorf("migration %s: %w", m.Name, err)
	}
	return nil
}

// recompactServerInfo rewrites every protocol_sessions.server_info to the
// bytes a rebuild from the log computes: the payload encoder compacted
// the server's info (json.Compact: whitespace outside strings removed,
// everything else as sent), while the live projection of earlier releases
// kept it as received. A value that is compact already (the sealed marker
// among them) or not JSON is left alone.
func recompactServerInfo(ctx context.Context, tx *sql.Tx, b Backend) error {
	rows, err := tx.QueryContext(ctx, `SELECT run_id, task_id, remote, generation, server_info FROM protocol_sessions WHERE server_info IS NOT NULL`)
	if err != nil {
		return fmt.Errorf("read protocol_sessions: %w", err)
	}
	type fix struct {
		run, task, remote string
		gen               int64
		info              string
	}
	var fixes []fix
	for rows.Next() {
		var f fix
		if err := rows.Scan(&f.run, &f.task, &f.remote, &f.gen, &f.info); err != nil {
			rows.Close()
			return fmt.Errorf("read protocol_sessions: %w", err)
		}
		var c bytes.Buffer
		if json.Compact(&c, []byte(f.info)) != nil || c.String() == f.info {
			continue
		}
		f.info = c.String()
		fixes = append(fixes, f)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read protocol_sessions: %w", err)
	}
	q := `UPDATE protocol_sessions SET server_info = ? WHERE run_id = ? AND task_id = ? AND remote = ? AND generation = ?`
	if b == Postgres {
		q = `UPDATE protocol_sessions SET server_info = $1 WHERE run_id = $2 AND task_id = $3 AND remote = $4 AND generation = $5`
	}
	for _, f := range fixes {
		if _, err := tx.ExecContext(ctx, q, f.info, f.run, f.task, f.remote, f.gen); err != nil {
			return fmt.Errorf("rewrite server_info of run %s session %s/%d: %w", f.run, f.remote, f.gen, err)
		}
	}
	return nil
}
