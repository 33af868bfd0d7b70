-- Liveness is the lease alone, and the database enforces it
-- (docs/POSTGRES.md, "Leases and fencing").
--
-- 1. A lease is free when it was released or has expired; nothing else.
-- Migration 0002 also freed a lease whose owner's session advisory lock
-- was gone, but one dropped connection (pg_terminate_backend,
-- idle_session_timeout, a pooler, a failover, a network reset) then lost
-- every run of a live worker within seconds. owner_key is no longer read
-- (nor written); agentctl_lease_owner_alive stays for older callers.
CREATE OR REPLACE FUNCTION agentctl_lease_free(owner TEXT, k BIGINT, expires TIMESTAMPTZ) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT owner IS NULL OR expires IS NULL OR expires < now()
$$;

-- 2. The append fence names the appender's lease to the events trigger
-- below: agentctl_fence_held records (run, epoch, owner) for the rest of
-- the transaction (a ROLLBACK TO SAVEPOINT takes it back with the member),
-- agentctl_fence_free records that the appender holds none.
CREATE OR REPLACE FUNCTION agentctl_fence_held(p_run TEXT, p_owner TEXT, p_epoch BIGINT) RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM run_leases
    WHERE run_id = p_run AND owner = p_owner AND lease_epoch = p_epoch AND lease_expires_at > now()
    FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease of run % at epoch % is no longer held', p_run, p_epoch USING ERRCODE = 'AG002';
    END IF;
    PERFORM set_config('agentctl.lease', p_run || ' ' || p_epoch || ' ' || p_owner, true);
END $$;

CREATE OR REPLACE FUNCTION agentctl_fence_free(p_run TEXT) RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
    o TEXT;
    e BIGINT;
BEGIN
    SELECT owner, lease_epoch INTO o, e FROM run_leases
    WHERE run_id = p_run AND NOT agentctl_lease_free(owner, owner_key, lease_expires_at)
    FOR SHARE;
    IF FOUND THEN
        RAISE EXCEPTION 'leased by % at epoch %', o, e USING ERRCODE = 'AG003';
    END IF;
    PERFORM set_config('agentctl.lease', '', true);
END $$;

-- 3. Every INSERT into events is fenced by the database, whatever the
-- client sent: for each run it appends to, either nobody holds a live
-- lease, or the transaction named that very lease (run, epoch, owner)
-- through agentctl_fence_held. Else AG002 (the transaction named an
-- older lease of the run: it was lost) or AG003 (it named none). One
-- check per statement, not per row: agentctl inserts a step's events in
-- one statement. The lease row is read FOR SHARE, so a claim of the run
-- waits for this transaction's end.
CREATE FUNCTION agentctl_events_leased() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    held TEXT := coalesce(current_setting('agentctl.lease', true), '');
    r TEXT;
    o TEXT;
    e BIGINT;
BEGIN
    FOR r IN SELECT DISTINCT run_id FROM added LOOP
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
CREATE TRIGGER events_leased AFTER INSERT ON events
    REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION agentctl_events_leased();
