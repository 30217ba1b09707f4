-- What lets several mcpd processes share one store (PostgreSQL; on SQLite
-- the same tables serve the one process). Each process is a node with a
-- run id and a beat; the streams it writes and the sessions whose
-- process-bound state (an upstream child) it holds name it as owner, so
-- that another node takes them over once its beat is older than the lease.
ALTER TABLE streams ADD COLUMN owner TEXT;
ALTER TABLE sessions ADD COLUMN owner TEXT;
CREATE TABLE nodes (
    run        TEXT    NOT NULL PRIMARY KEY,
    started_ms INTEGER NOT NULL,
    beat_ms    INTEGER NOT NULL,
    inflight   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
-- Client messages on their way to the node that runs the call they answer
-- or cancel (store_inbox_put).
CREATE TABLE inbox (
    id         INTEGER PRIMARY KEY,
    session_id TEXT    NOT NULL,
    message    TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
);
-- The one connection that reads a session's standalone GET stream,
-- deployment-wide, until its lease runs out.
CREATE TABLE standalone_claims (
    session_id  TEXT    NOT NULL PRIMARY KEY,
    run         TEXT    NOT NULL,
    until_ms    INTEGER NOT NULL
) WITHOUT ROWID;
