-- Projection: one row per run, folded from run.* and task.* events.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    workflow        TEXT NOT NULL,
    workflow_digest TEXT NOT NULL,
    mode            TEXT NOT NULL,
    source_run_id   TEXT,
    state           TEXT NOT NULL,
    exit_code       INTEGER,
    error           TEXT,
    calls           INTEGER NOT NULL DEFAULT 0,
    events          INTEGER NOT NULL DEFAULT 0,
    last_seq        INTEGER NOT NULL DEFAULT 0,
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    updated_at      TEXT NOT NULL
);
CREATE INDEX runs_started ON runs (started_at);
