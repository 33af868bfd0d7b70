-- Projection: one row per task attempt.
CREATE TABLE tasks (
    run_id      TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    server      TEXT,
    tool        TEXT,
    state       TEXT NOT NULL,
    error       TEXT,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    updated_at  TEXT NOT NULL,
    PRIMARY KEY (run_id, task_id, attempt)
);
