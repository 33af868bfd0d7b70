-- A task row's rowid (its listing order in inspect and `runs show`) is
-- the seq of the event that inserted it, as on SQLite (its migration
-- 0020, where tasks became a table keyed by its identity): one statement
-- for both backends, and the same value live and rebuilt. Rows of earlier
-- releases are numbered 1, 2, … in their old order within their run:
-- below the seq of any event a resumed run appends later.
ALTER TABLE tasks ALTER COLUMN rowid DROP IDENTITY IF EXISTS;
UPDATE tasks SET rowid = n.rn
FROM (SELECT run_id, task_id, attempt, ROW_NUMBER() OVER (PARTITION BY run_id ORDER BY rowid) AS rn FROM tasks) n
WHERE tasks.run_id = n.run_id AND tasks.task_id = n.task_id AND tasks.attempt = n.attempt;
