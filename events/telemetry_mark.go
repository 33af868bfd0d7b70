package events

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
)

// telemetryMarkPrefix names the settings row that remembers how far a
// run's telemetry was exported: "telemetry.exported/" + run id, value the
// seq through which every span that ended was accepted by the collector.
// A settings row and not an event: exporting is not a fact of the run, it
// happens after run.finished (the run's span ends there), without the
// run's lock, and must not change the log (and its hash chain) of a run
// kept as evidence.
const telemetryMarkPrefix = "telemetry.exported/"

// TelemetryMark returns how far runID's telemetry was exported (0: none).
func (db *DB) TelemetryMark(ctx context.Context, runID string) (int64, error) {
	var v string
	err := db.x.GetContext(ctx, &v, `SELECT value FROM settings WHERE name = ?`, telemetryMarkPrefix+runID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, &Error{Op: "read telemetry mark of run " + runID, Path: db.path, Err: classify(err)}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, &Error{Op: "read telemetry mark of run " + runID, Path: db.path, Err: err}
	}
	return n, nil
}

// SetTelemetryMark records that runID's telemetry was exported through seq.
func (db *DB) SetTelemetryMark(ctx context.Context, runID string, seq int64) error {
	err := db.settingsTx(ctx, func(tx *Tx, now string) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO settings (name, value, updated_at) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, telemetryMarkPrefix+runID, strconv.FormatInt(seq, 10), now)
		return err
	})
	if err != nil {
		return &Error{Op: "record telemetry mark of run " + runID, Path: db.path, Err: classify(err)}
	}
	return nil
}
