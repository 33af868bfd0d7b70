-- Projection: one row per run x task x remote x generation.
CREATE TABLE protocol_sessions (
    run_id            TEXT NOT NULL,
    task_id           TEXT NOT NULL,
    remote            TEXT NOT NULL,
    generation        INTEGER NOT NULL,
    url               TEXT NOT NULL,
    status            TEXT NOT NULL CHECK (status IN ('initialized','reinitialized','expired','recorded')),
    session_id_digest TEXT,
    protocol_version  TEXT,
    server_info       TEXT,
    catalog_digest    TEXT,
    source_run_id     TEXT,
    source_task_id    TEXT,
    created_at        TEXT NOT NULL,
    updated_at        TEXT NOT NULL,
    PRIMARY KEY (run_id, task_id, remote, generation)
);
