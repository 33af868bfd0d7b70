-- Run ownership by lease (docs/POSTGRES.md, "Leases and fencing"): one row
-- per run naming the process that may append to it (owner), a counter that
-- goes up at every claim (lease_epoch), and when the claim lapses
-- (lease_expires_at, by the database's clock). A worker claims a queued
-- run, or a running run whose lease expired, by bumping the epoch; every
-- append of a run checks, in its transaction, that its writer still holds
-- the current epoch (fencing).
--
-- owner_key is the session advisory lock the owner process holds for as
-- long as it is connected: once the lock is gone (the process died and the
-- server closed its session) the lease may be taken before it expires. A
-- paused or unreachable owner keeps its session, and its lease runs out.
CREATE TABLE run_leases (
    run_id           TEXT PRIMARY KEY,
    owner            TEXT,
    owner_key        BIGINT,
    lease_epoch      BIGINT NOT NULL DEFAULT 0,
    lease_expires_at TIMESTAMPTZ
);

-- Whether the process holding advisory lock k (a bigint key: classid is
-- its high 32 bits, objid its low 32) still has a session on this
-- database. An unknown key counts as alive: only the expiry frees it.
CREATE FUNCTION agentctl_lease_owner_alive(k BIGINT) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT k IS NULL OR EXISTS (
        SELECT 1 FROM pg_locks
        WHERE locktype = 'advisory' AND granted AND objsubid = 1
          AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND classid = (k >> 32)::oid AND objid = (k & 4294967295)::oid)
$$;

-- A lease nobody may hold any more: released, expired, or its owner's
-- session is gone.
CREATE FUNCTION agentctl_lease_free(owner TEXT, k BIGINT, expires TIMESTAMPTZ) RETURNS BOOLEAN LANGUAGE sql STABLE AS $$
    SELECT owner IS NULL OR expires IS NULL OR expires < now() OR NOT agentctl_lease_owner_alive(k)
$$;

-- Every run has a row to claim, from the transaction that creates it.
CREATE FUNCTION agentctl_run_lease_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO run_leases (run_id) VALUES (NEW.run_id) ON CONFLICT (run_id) DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER runs_lease_row AFTER INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION agentctl_run_lease_row();

-- Runs that existed before this migration get theirs now.
INSERT INTO run_leases (run_id) SELECT run_id FROM runs ON CONFLICT (run_id) DO NOTHING;
