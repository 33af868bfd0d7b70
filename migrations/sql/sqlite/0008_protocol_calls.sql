-- Projection: one row per call (effect identity).
CREATE TABLE protocol_calls (
    effect_id        TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    task_id          TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    operation        TEXT NOT NULL DEFAULT 'mcp.call',
    server           TEXT NOT NULL,
    tool             TEXT NOT NULL,
    idempotency      TEXT NOT NULL,
    generation       INTEGER NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('prepared','dispatched','succeeded','failed','uncertain','cancelled','recorded')),
    arguments_digest TEXT NOT NULL,
    schema_digest    TEXT,
    result_digest    TEXT,
    error            TEXT,
    protocol_state   TEXT,
    source_run_id    TEXT,
    source_effect_id TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);
CREATE INDEX protocol_calls_run ON protocol_calls (run_id, task_id, attempt);
