-- A session row's identity never changes.
CREATE TRIGGER protocol_sessions_identity BEFORE UPDATE ON protocol_sessions
WHEN NEW.run_id IS NOT OLD.run_id OR NEW.task_id IS NOT OLD.task_id
  OR NEW.remote IS NOT OLD.remote OR NEW.generation IS NOT OLD.generation
  OR NEW.url IS NOT OLD.url
BEGIN
    SELECT RAISE(ABORT, 'protocol_sessions: identity columns are immutable');
END;
