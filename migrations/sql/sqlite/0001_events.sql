-- The append-only event log: the only source of truth (DESIGN §4).
CREATE TABLE events (
    run_id     TEXT    NOT NULL,
    seq        INTEGER NOT NULL CHECK (seq >= 1),
    stream     TEXT    NOT NULL,
    type       TEXT    NOT NULL,
    payload    TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    prev_hash  TEXT    NOT NULL,
    hash       TEXT    NOT NULL,
    PRIMARY KEY (run_id, seq)
);
