-- The PostgreSQL schema, equivalent to SQLite migrations 0001-0014 (DESIGN §4).
-- Payloads and timestamps are TEXT holding the exact bytes that were hashed
-- (never jsonb, which reorders keys); integers are BIGINT.

-- The append-only event log: the only source of truth.
CREATE TABLE events (
    run_id     TEXT   NOT NULL,
    seq        BIGINT NOT NULL CHECK (seq >= 1),
    stream     TEXT   NOT NULL,
    type       TEXT   NOT NULL,
    payload    TEXT   NOT NULL,
    created_at TEXT   NOT NULL,
    prev_hash  TEXT   NOT NULL,
    hash       TEXT   NOT NULL,
    PRIMARY KEY (run_id, seq)
);
CREATE INDEX events_run_first ON events (run_id) WHERE seq = 1;

-- Events are never changed or removed, whoever holds the connection.
CREATE FUNCTION agentctl_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events are append-only: % refused', TG_OP USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER events_no_update BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION agentctl_events_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION agentctl_events_append_only();

-- seq is dense from 1 per run and each event links to its predecessor's
-- hash: a row written from a stale tail is refused (SQLSTATE AG001, which
-- agentctl reads as "someone else appended: reload the tail"). Two writers
-- racing for the same seq meet the primary key instead (23505).
CREATE FUNCTION agentctl_events_chain() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    last_seq  BIGINT;
    last_hash TEXT;
BEGIN
    SELECT seq, hash INTO last_seq, last_hash FROM events
        WHERE run_id = NEW.run_id ORDER BY seq DESC LIMIT 1;
    IF NOT FOUND THEN
        last_seq := 0;
        last_hash := '';
    END IF;
    IF NEW.seq <> last_seq + 1 THEN
        RAISE EXCEPTION 'events: seq must be dense per run (run %, seq %, last %)', NEW.run_id, NEW.seq, last_seq
            USING ERRCODE = 'AG001';
    END IF;
    IF NEW.seq > 1 AND NEW.prev_hash <> last_hash THEN
        RAISE EXCEPTION 'events: prev_hash of run % seq % is not the hash of seq %', NEW.run_id, NEW.seq, last_seq
            USING ERRCODE = 'AG001';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER events_chain BEFORE INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION agentctl_events_chain();

-- Projection: one row per run, folded from run.* and task.* events.
CREATE TABLE runs (
    run_id          TEXT PRIMARY KEY,
    workflow        TEXT NOT NULL,
    workflow_digest TEXT NOT NULL,
    mode            TEXT NOT NULL,
    source_run_id   TEXT,
    state           TEXT NOT NULL,
    exit_code       BIGINT,
    error           TEXT,
    calls           BIGINT NOT NULL DEFAULT 0,
    events          BIGINT NOT NULL DEFAULT 0,
    last_seq        BIGINT NOT NULL DEFAULT 0,
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    updated_at      TEXT NOT NULL
);
CREATE INDEX runs_started ON runs (started_at);
CREATE INDEX runs_state ON runs (state) WHERE state IN ('queued', 'running');

-- Projection rows are listed in log order: rowid stands for SQLite's rowid
-- (insertion order); it is not part of a row's value.

-- Projection: one row per task attempt.
CREATE TABLE tasks (
    run_id      TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    attempt     BIGINT NOT NULL,
    server      TEXT,
    tool        TEXT,
    state       TEXT NOT NULL,
    error       TEXT,
    started_at  TEXT NOT NULL,
    finished_at TEXT,
    updated_at  TEXT NOT NULL,
    rowid       BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (run_id, task_id, attempt)
);

-- Projection: one row per run x task x remote x generation.
CREATE TABLE protocol_sessions (
    run_id            TEXT NOT NULL,
    task_id           TEXT NOT NULL,
    remote            TEXT NOT NULL,
    generation        BIGINT NOT NULL,
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
    rowid             BIGINT GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (run_id, task_id, remote, generation)
);

-- Projection: one row per call (effect identity).
CREATE TABLE protocol_calls (
    effect_id        TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    task_id          TEXT NOT NULL,
    attempt          BIGINT NOT NULL,
    operation        TEXT NOT NULL DEFAULT 'mcp.call',
    server           TEXT NOT NULL,
    tool             TEXT NOT NULL,
    idempotency      TEXT NOT NULL,
    generation       BIGINT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('prepared','dispatched','succeeded','failed','uncertain','cancelled','recorded')),
    arguments_digest TEXT NOT NULL,
    schema_digest    TEXT,
    result_digest    TEXT,
    error            TEXT,
    protocol_state   TEXT,
    source_run_id    TEXT,
    source_effect_id TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    redispatches     BIGINT NOT NULL DEFAULT 0,
    json_rpc_id      TEXT,
    rowid            BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX protocol_calls_run ON protocol_calls (run_id, task_id, attempt);

-- A call's identity never changes once prepared.
CREATE FUNCTION agentctl_protocol_calls_identity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.effect_id IS DISTINCT FROM OLD.effect_id OR NEW.run_id IS DISTINCT FROM OLD.run_id
       OR NEW.task_id IS DISTINCT FROM OLD.task_id OR NEW.attempt IS DISTINCT FROM OLD.attempt
       OR NEW.operation IS DISTINCT FROM OLD.operation OR NEW.server IS DISTINCT FROM OLD.server
       OR NEW.tool IS DISTINCT FROM OLD.tool OR NEW.idempotency IS DISTINCT FROM OLD.idempotency
       OR NEW.arguments_digest IS DISTINCT FROM OLD.arguments_digest THEN
        RAISE EXCEPTION 'protocol_calls: identity columns are immutable' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER protocol_calls_identity BEFORE UPDATE ON protocol_calls
    FOR EACH ROW EXECUTE FUNCTION agentctl_protocol_calls_identity();

-- A session row's identity never changes.
CREATE FUNCTION agentctl_protocol_sessions_identity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.run_id IS DISTINCT FROM OLD.run_id OR NEW.task_id IS DISTINCT FROM OLD.task_id
       OR NEW.remote IS DISTINCT FROM OLD.remote OR NEW.generation IS DISTINCT FROM OLD.generation
       OR NEW.url IS DISTINCT FROM OLD.url THEN
        RAISE EXCEPTION 'protocol_sessions: identity columns are immutable' USING ERRCODE = 'restrict_violation';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER protocol_sessions_identity BEFORE UPDATE ON protocol_sessions
    FOR EACH ROW EXECUTE FUNCTION agentctl_protocol_sessions_identity();

-- Projection: operator reconciliations of uncertain calls, written once.
CREATE TABLE effects (
    effect_id     TEXT PRIMARY KEY,
    run_id        TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('applied','not-applied')),
    reason        TEXT NOT NULL,
    result_digest TEXT,
    reconciled_at TEXT NOT NULL
);
CREATE FUNCTION agentctl_effects_no_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'effects rows are written once: UPDATE refused' USING ERRCODE = 'restrict_violation';
END $$;
CREATE TRIGGER effects_no_update BEFORE UPDATE ON effects
    FOR EACH ROW EXECUTE FUNCTION agentctl_effects_no_update();

-- Database-wide settings (encryption key ids and wrapped data keys; never a key in clear).
CREATE TABLE settings (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
