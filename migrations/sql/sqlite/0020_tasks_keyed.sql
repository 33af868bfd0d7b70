-- tasks becomes a WITHOUT ROWID table keyed by its identity (issue 28
-- item 6). A rowid table with a declared key is two B-trees, the rows by
-- rowid and the key's index, and every call's commit wrote both: its task
-- finished and the next one started. Keyed by (run, task, attempt) it is
-- one. The listing order rowid gave (insertion order, which inspect and
-- `runs show` print) is kept in a column named rowid that holds the seq of
-- the event that inserted the row, so the live fold and a rebuild give the
-- same order. Rows of earlier releases are numbered 1, 2, … in their old
-- rowid order within their run: below the seq of any event a resumed run
-- appends later.
CREATE TABLE tasks_keyed (
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
    rowid       INTEGER NOT NULL,
    PRIMARY KEY (run_id, task_id, attempt)
) WITHOUT ROWID;
INSERT INTO tasks_keyed
SELECT run_id, task_id, attempt, server, tool, state, error, started_at, finished_at, updated_at,
       ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY rowid)
FROM tasks;
DROP TABLE tasks;
ALTER TABLE tasks_keyed RENAME TO tasks;
