-- Lookups by stream (a call's or a session's events) and by type (run.created).
CREATE INDEX events_stream ON events (run_id, stream, seq);
CREATE INDEX events_type ON events (type, run_id);
