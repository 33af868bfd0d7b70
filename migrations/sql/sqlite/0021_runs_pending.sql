-- The runs a worker may take, indexed (issue 34). A worker lists the
-- running runs and the oldest queued ones each time a run ends
-- (workflow/worker LocalQueue.Candidates); with no index on state that is
-- a scan of every run the database ever recorded, so a queue drained
-- beside thousands of finished runs cost several times more per run than
-- in a fresh database. Two partial indexes hold only the runs in those
-- states, in run id order (the order they are taken in): a run enters one
-- when it is queued or starts, and leaves it when it ends. Each matches
-- its query's WHERE term for term, as SQLite requires of a partial index.
CREATE INDEX IF NOT EXISTS runs_queued ON runs (run_id) WHERE state = 'queued' AND mode = 'run';
CREATE INDEX IF NOT EXISTS runs_running ON runs (run_id) WHERE state = 'running' AND mode = 'run';
