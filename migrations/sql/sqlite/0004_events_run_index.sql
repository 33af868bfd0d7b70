-- One tiny entry per run: listing runs reads the first event of each.
-- (No index on stream or type: the hot path appends, and reads go by run.)
CREATE INDEX events_run_first ON events (run_id) WHERE seq = 1;
