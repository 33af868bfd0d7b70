-- The identity triggers of protocol_calls and protocol_sessions (0001) ran
-- a PL/pgSQL function for every UPDATE of a row, one per durable call
-- (its result), to find the identity unchanged nearly always (issue 34:
-- the server's CPU per call). The same comparison now sits in the
-- triggers' WHEN clause, which PostgreSQL evaluates itself: the function
-- (unchanged, it still refuses with restrict_violation) runs only for an
-- UPDATE that changes an identity column. What is refused is the same.
DROP TRIGGER IF EXISTS protocol_calls_identity ON protocol_calls;
CREATE TRIGGER protocol_calls_identity BEFORE UPDATE ON protocol_calls
    FOR EACH ROW
    WHEN (NEW.effect_id IS DISTINCT FROM OLD.effect_id OR NEW.run_id IS DISTINCT FROM OLD.run_id
       OR NEW.task_id IS DISTINCT FROM OLD.task_id OR NEW.attempt IS DISTINCT FROM OLD.attempt
       OR NEW.operation IS DISTINCT FROM OLD.operation OR NEW.server IS DISTINCT FROM OLD.server
       OR NEW.tool IS DISTINCT FROM OLD.tool OR NEW.idempotency IS DISTINCT FROM OLD.idempotency
       OR NEW.arguments_digest IS DISTINCT FROM OLD.arguments_digest)
    EXECUTE FUNCTION agentctl_protocol_calls_identity();

DROP TRIGGER IF EXISTS protocol_sessions_identity ON protocol_sessions;
CREATE TRIGGER protocol_sessions_identity BEFORE UPDATE ON protocol_sessions
    FOR EACH ROW
    WHEN (NEW.run_id IS DISTINCT FROM OLD.run_id OR NEW.task_id IS DISTINCT FROM OLD.task_id
       OR NEW.remote IS DISTINCT FROM OLD.remote OR NEW.generation IS DISTINCT FROM OLD.generation
       OR NEW.url IS DISTINCT FROM OLD.url)
    EXECUTE FUNCTION agentctl_protocol_sessions_identity();
