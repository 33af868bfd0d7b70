-- A call's identity never changes once prepared.
CREATE TRIGGER protocol_calls_identity BEFORE UPDATE ON protocol_calls
WHEN NEW.effect_id IS NOT OLD.effect_id OR NEW.run_id IS NOT OLD.run_id
  OR NEW.task_id IS NOT OLD.task_id OR NEW.attempt IS NOT OLD.attempt
  OR NEW.operation IS NOT OLD.operation OR NEW.server IS NOT OLD.server
  OR NEW.tool IS NOT OLD.tool OR NEW.idempotency IS NOT OLD.idempotency
  OR NEW.arguments_digest IS NOT OLD.arguments_digest
BEGIN
    SELECT RAISE(ABORT, 'protocol_calls: identity columns are immutable');
END;
