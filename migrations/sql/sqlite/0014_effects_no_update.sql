-- A reconciliation is recorded once: the projector inserts effects rows and
-- never updates them (a rebuild deletes and re-inserts), so an UPDATE is
-- refused like on events. The other projection tables are updated by the
-- projector; `inspect --verify` recomputes them from the log instead.
CREATE TRIGGER effects_no_update BEFORE UPDATE ON effects
BEGIN
    SELECT RAISE(ABORT, 'effects rows are written once: UPDATE refused');
END;
