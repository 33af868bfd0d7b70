-- Projection: operator reconciliations of uncertain calls.
CREATE TABLE effects (
    effect_id   TEXT PRIMARY KEY,
    run_id      TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('applied','not-applied')),
    reason      TEXT NOT NULL,
    result_digest TEXT,
    reconciled_at TEXT NOT NULL
);
