-- The runs row no longer keeps counters that every commit rewrote (issue
-- 28 item 6): a run's calls are its protocol_calls rows and its events
-- are the log's, counted when inspect and runs list read them; updated_at
-- changes with the run's own events (created, started, resumed,
-- finished). One statement less per commit.
ALTER TABLE runs DROP COLUMN calls;
ALTER TABLE runs DROP COLUMN events;
ALTER TABLE runs DROP COLUMN last_seq;
-- updated_at as a rebuild now computes it: the run's last own event.
UPDATE runs SET updated_at = COALESCE((SELECT e.created_at FROM events e WHERE e.run_id = runs.run_id
    AND e.type IN ('run.created', 'run.started', 'run.resumed', 'run.finished') ORDER BY e.seq DESC LIMIT 1), updated_at);
