-- Database-wide settings (encryption key ids and wrapped data keys; never a key in clear).
CREATE TABLE settings (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
