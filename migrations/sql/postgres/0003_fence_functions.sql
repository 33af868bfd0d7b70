-- The append fence (docs/POSTGRES.md, "Leases and fencing") as statements
-- that fail instead of rows the client must look at: an append sends the
-- fence with its event rows, its projection writes and its COMMIT in one
-- pipelined round trip, and a fence that does not hold aborts the
-- transaction before the COMMIT runs. FOR SHARE as before: a concurrent
-- claim of the run waits for the appending transaction's end.

-- The appender's lease is current (owner, epoch, not expired); else AG002.
CREATE FUNCTION agentctl_fence_held(p_run TEXT, p_owner TEXT, p_epoch BIGINT) RETURNS VOID LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM run_leases
    WHERE run_id = p_run AND owner = p_owner AND lease_epoch = p_epoch AND lease_expires_at > now()
    FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'lease of run % at epoch % is no longer held', p_run, p_epoch USING ERRCODE = 'AG002';
    END IF;
END $$;

-- An appender without a lease: nobody else holds a live one; else AG003,
-- naming the holder.
CREATE FUNCTION agentctl_fence_free(p_run TEXT) RETURNS VOID LANGUAGE plpgsql AS $$
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
END $$;
