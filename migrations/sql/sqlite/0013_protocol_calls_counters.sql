-- Reconnects are counted per call for inspect's timeline.
ALTER TABLE protocol_calls ADD COLUMN redispatches INTEGER NOT NULL DEFAULT 0;
ALTER TABLE protocol_calls ADD COLUMN json_rpc_id TEXT;
