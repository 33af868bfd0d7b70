-- runs prune is the one way events leave the log (issue 17 item 6). The
-- DELETE trigger on events lets a row go only while a grant for its run
-- exists, and a grant cannot outlive the transaction that inserts it: its
-- guard column references prune_grant_guard, which stays empty, through a
-- deferred foreign key, so a commit with a grant left in place fails. The
-- prune transaction inserts the grants, deletes, then removes the grants.
-- A grant is refused for a run whose last run.* event is not run.finished
-- (running, queued, resumed, or unknown), and grants are never updated.
CREATE TABLE prune_grant_guard (id INTEGER PRIMARY KEY);
CREATE TRIGGER prune_grant_guard_empty BEFORE INSERT ON prune_grant_guard
BEGIN
    SELECT RAISE(ABORT, 'prune_grant_guard stays empty');
END;
CREATE TABLE prune_grants (
    run_id TEXT PRIMARY KEY,
    guard  INTEGER NOT NULL DEFAULT 1 REFERENCES prune_grant_guard (id) DEFERRABLE INITIALLY DEFERRED
);
CREATE TRIGGER prune_grants_finished_only BEFORE INSERT ON prune_grants
WHEN (SELECT type FROM events WHERE run_id = NEW.run_id
        AND type IN ('run.created', 'run.started', 'run.resumed', 'run.finished')
        ORDER BY seq DESC LIMIT 1) IS NOT 'run.finished'
BEGIN
    SELECT RAISE(ABORT, 'events: only a finished run can be pruned');
END;
CREATE TRIGGER prune_grants_no_update BEFORE UPDATE ON prune_grants
BEGIN
    SELECT RAISE(ABORT, 'prune grants are never updated');
END;
DROP TRIGGER events_no_delete;
CREATE TRIGGER events_no_delete BEFORE DELETE ON events
WHEN NOT EXISTS (SELECT 1 FROM prune_grants WHERE run_id = OLD.run_id)
BEGIN
    SELECT RAISE(ABORT, 'events are append-only: DELETE refused');
END;
