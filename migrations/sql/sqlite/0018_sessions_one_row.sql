-- protocol_sessions holds one row per session: (run, remote, generation),
-- the row of the task that opened it (issue 28 item 6, issue 34 item 4).
-- Earlier releases copied that row to every other task that used the
-- session (session.attached, then call.prepared's sessionFrom): a row and
-- two statements per call that repeated what the opener's row and the
-- call's own row (server, generation) already say. inspect now reads the
-- tasks of a session from protocol_calls. The copies go: the first row of
-- each session (lowest rowid) is the opener's, every copy came after it.
DELETE FROM protocol_sessions
WHERE rowid NOT IN (SELECT MIN(rowid) FROM protocol_sessions GROUP BY run_id, remote, generation);
