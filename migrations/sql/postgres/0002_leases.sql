-- Run ownership by lease (docs/POSTGRES.md, "Leases and fencing"): one row
-- per run naming the process that may append to it (owner), a counter that
-- goes up at every claim (lease_epoch), and when the claim lapses
-- (lease_expires_at, by the database's clock). A worker claims a queued
-- run, or a running run whose lease expired, by bumping the epoch; every
-- append of a run checks, in its transaction, that its writer still holds
-- the current epoch (fencing).
CREATE TABLE run_leases (
    run_id           TEXT PRIMARY KEY,
    owner            TEXT,
    lease_epoch      BIGINT NOT NULL DEFAULT 0,
    lease_expires_at TIMESTAMPTZ
);

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
