-- One trigger call per INSERT statement on events instead of one per row
-- (issue 34: PostgreSQL's server CPU per call). The per-row chain trigger
-- (events_chain, 0001) cost a PL/pgSQL call and an index probe for every
-- event, about a quarter of the server's CPU of a durable call
-- (BENCHMARKS.md, "the chain trigger"); the lease check (events_leased,
-- 0004) was already once per statement. Both now run in one statement
-- trigger, over the statement's new rows (the transition table), and the
-- database still checks every row, as before:
--
-- * the chain, first: the new rows of each run, in seq order, follow each
--   other (seq + 1, prev_hash = the hash before), and the first one
--   follows the log's last event: seq 1, or the event at seq - 1 exists
--   and its hash is the row's prev_hash. One probe per run and statement,
--   not per row. A run's log is dense from 1 (every earlier row was
--   checked alike), and the primary key refuses a seq the log already
--   has before this trigger runs, so "seq - 1 exists and seq does not"
--   means "seq - 1 is the last". AG001 as before ("someone else appended:
--   reload the tail"); a stale writer's seq that the log already holds
--   now meets the primary key first (23505), which agentctl reads the
--   same way.
-- * then the fence, unchanged from 0004: for each run the statement
--   appends to, nobody holds a live lease, or the transaction named that
--   very lease through agentctl_fence_held; else AG002 / AG003.
CREATE OR REPLACE FUNCTION agentctl_events_checked() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held      TEXT := coalesce(current_setting('agentctl.lease', true), '');
    a         RECORD;
    runs      TEXT[] := '{}';
    cur       TEXT;
    last_seq  BIGINT;
    last_hash TEXT;
    r         TEXT;
    o         TEXT;
    e         BIGINT;
BEGIN
    FOR a IN SELECT run_id, seq, prev_hash, hash FROM added ORDER BY run_id, seq LOOP
        IF cur IS DISTINCT FROM a.run_id THEN
            cur := a.run_id;
            runs := runs || cur;
            last_seq := a.seq - 1;
            last_hash := NULL;
            IF a.seq > 1 THEN
                SELECT hash INTO last_hash FROM events WHERE run_id = cur AND seq = last_seq;
                IF NOT FOUND THEN
                    SELECT coalesce(max(seq), 0) INTO last_seq FROM events WHERE run_id = cur AND seq < a.seq;
                END IF;
            END IF;
        END IF;
        IF a.seq <> last_seq + 1 THEN
            RAISE EXCEPTION 'events: seq must be dense per run (run %, seq %, last %)', a.run_id, a.seq, last_seq
                USING ERRCODE = 'AG001';
        END IF;
        IF a.seq > 1 AND a.prev_hash IS DISTINCT FROM last_hash THEN
            RAISE EXCEPTION 'events: prev_hash of run % seq % is not the hash of seq %', a.run_id, a.seq, last_seq
                USING ERRCODE = 'AG001';
        END IF;
        last_seq := a.seq;
        last_hash := a.hash;
    END LOOP;
    FOREACH r IN ARRAY runs LOOP
        SELECT owner, lease_epoch INTO o, e FROM run_leases
        WHERE run_id = r AND NOT agentctl_lease_free(owner, owner_key, lease_expires_at)
        FOR SHARE;
        IF FOUND AND held IS DISTINCT FROM (r || ' ' || e || ' ' || o) THEN
            IF split_part(held, ' ', 1) = r THEN
                RAISE EXCEPTION 'events: append to run % refused: lease lost (held by % at epoch %)', r, o, e USING ERRCODE = 'AG002';
            END IF;
            RAISE EXCEPTION 'events: append to run % refused: leased by % at epoch %', r, o, e USING ERRCODE = 'AG003';
        END IF;
    END LOOP;
    RETURN NULL;
END $$;

-- IF EXISTS: the statements may run again over their own result (a
-- database whose version row was taken back) and leave the same schema.
DROP TRIGGER IF EXISTS events_chain ON events;
DROP TRIGGER IF EXISTS events_leased ON events;
DROP TRIGGER IF EXISTS events_checked ON events;
DROP FUNCTION IF EXISTS agentctl_events_chain();
DROP FUNCTION IF EXISTS agentctl_events_leased();
CREATE TRIGGER events_checked AFTER INSERT ON events
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION agentctl_events_checked();
