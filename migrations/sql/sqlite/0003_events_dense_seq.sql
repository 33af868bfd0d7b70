-- seq is dense from 1 per run: a new row must follow the run's last seq.
CREATE TRIGGER events_dense_seq BEFORE INSERT ON events
WHEN NEW.seq <> COALESCE((SELECT MAX(seq) FROM events WHERE run_id = NEW.run_id), 0) + 1
BEGIN
    SELECT RAISE(ABORT, 'events: seq must be dense per run');
END;
