-- OAuth credentials (issue 31): one row per (issuer, client, resource).
-- `secret` holds the tokens, the refresh token, the DPoP key and the
-- registered client secret as JSON: an AES-256-GCM envelope sealed with
-- the database's data key when encryption is on (sealed = 1), in clear
-- only when the operator opted in (--allow-plaintext-credentials) on a
-- database without encryption (sealed = 0); NULL = no credentials (a row
-- kept as the lock of its key). The other columns are not secret: what
-- `agentctl auth status` shows. Credentials never enter `events`.
CREATE TABLE credentials (
    issuer     TEXT NOT NULL,
    client_id  TEXT NOT NULL,
    resource   TEXT NOT NULL,
    sealed     INTEGER NOT NULL DEFAULT 0,
    secret     TEXT,
    scopes     TEXT NOT NULL DEFAULT '',
    token_type TEXT NOT NULL DEFAULT '',
    expires_at TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL,
    PRIMARY KEY (issuer, client_id, resource)
);
