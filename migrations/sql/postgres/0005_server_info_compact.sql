-- protocol_sessions.server_info holds a server's info as the log stores
-- it: compact JSON (issue 28 item 4). Rows written before this release by
-- the live projection kept the bytes as received (whitespace and all), so
-- inspect --verify, which rebuilds them from the log, found them different.
-- The rewrite is a Go step (recompactServerInfo in migrations/steps.go):
-- compaction needs a JSON scanner that keeps every other byte as sent.
SELECT 1;
