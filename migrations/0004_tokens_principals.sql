-- Bearer tokens (only a SHA-256 of each is kept), the principal a session
-- belongs to, how a session was created and why an operator ended it.
CREATE TABLE tokens (
    name         TEXT    NOT NULL PRIMARY KEY,
    hash         TEXT    NOT NULL UNIQUE,
    note         TEXT,
    created_ms   INTEGER NOT NULL,
    expires_ms   INTEGER,
    revoked_ms   INTEGER,
    last_used_ms INTEGER
);
ALTER TABLE sessions ADD COLUMN principal TEXT;
ALTER TABLE sessions ADD COLUMN transport TEXT;
ALTER TABLE sessions ADD COLUMN kill_reason TEXT;
CREATE INDEX sessions_by_deleted ON sessions(deleted_ms);
