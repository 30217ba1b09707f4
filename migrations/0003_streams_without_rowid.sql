-- Streams keyed by their time-ordered id alone (no rowid tree beside the
-- key), and no index on ended_ms: stream ids begin with their creation time,
-- so the purge of ended streams range-scans the key instead. A message now
-- dirties three B-tree pages instead of five.
CREATE TABLE streams_new (
    id          TEXT    NOT NULL PRIMARY KEY,
    session_id  TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    kind        TEXT    NOT NULL CHECK (kind IN ('request', 'standalone')),
    request_id  TEXT,
    state       TEXT    NOT NULL DEFAULT 'active',
    created_ms  INTEGER NOT NULL,
    ended_ms    INTEGER
) WITHOUT ROWID;
INSERT INTO streams_new (id, session_id, kind, request_id, state, created_ms, ended_ms)
    SELECT id, session_id, kind, request_id, state, created_ms, ended_ms FROM streams;
DROP TABLE streams;
ALTER TABLE streams_new RENAME TO streams;
CREATE INDEX streams_by_session ON streams(session_id);
