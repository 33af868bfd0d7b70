-- The append fence in one place: the events trigger (issue 34, a call's
-- server time on PostgreSQL). Until now each append first called
-- agentctl_fence_held (a PL/pgSQL call, a lease probe FOR SHARE and a
-- set_config) and the events_checked trigger then probed the same lease
-- row again. Now the appender only names its lease (set_config of
-- agentctl.lease, or '' when it holds none) and the trigger decides, for
-- each run the statement appends to, with one probe of its lease row:
--
-- * the transaction names a lease of this run: that very lease (run,
--   epoch, owner) must be live, else AG002 (lost: expired, released or
--   taken over). That is agentctl_fence_held's check, made where the
--   events are inserted, so no append can skip it;
-- * it names none: nobody may hold a live lease, else AG003 (what
--   agentctl_fence_free checked).
--
-- The lease row is still read FOR SHARE, so a claim of the run waits for
-- this transaction's end. The chain check is unchanged from 0009.
-- agentctl_fence_held / agentctl_fence_free stay for older clients.
CREATE OR REPLACE FUNCTION agentctl_events_checked() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held      TEXT := coalesce(current_setting('agentctl.lease', true), '');
    held_run  TEXT;
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
    held_run := split_part(held, ' ', 1);
    FOREACH r IN ARRAY runs LOOP
        -- A live lease: NOT agentctl_lease_free(…), written out, so that
        -- planning the probe does not inline (parse) that function's body.
        SELECT owner, lease_epoch INTO o, e FROM run_leases
        WHERE run_id = r AND owner IS NOT NULL AND lease_expires_at >= now()
        FOR SHARE;
        IF held_run = r THEN
            IF NOT FOUND THEN
                RAISE EXCEPTION 'events: append to run % refused: lease at epoch % is no longer held', r, split_part(held, ' ', 2)
                    USING ERRCODE = 'AG002';
            END IF;
            IF held IS DISTINCT FROM (r || ' ' || e || ' ' || o) THEN
                RAISE EXCEPTION 'events: append to run % refused: lease lost (held by % at epoch %)', r, o, e USING ERRCODE = 'AG002';
            END IF;
        ELSIF FOUND THEN
            RAISE EXCEPTION 'events: append to run % refused: leased by % at epoch %', r, o, e USING ERRCODE = 'AG003';
        END IF;
    END LOOP;
    RETURN NULL;
END $$;
