-- Sessions, their durable streams and chunks, and the event log.
CREATE TABLE sessions (
    id               TEXT PRIMARY KEY,
    protocol_version TEXT    NOT NULL,
    init_params      TEXT    NOT NULL,
    log_level        TEXT    NOT NULL DEFAULT 'debug',
    initialized      INTEGER NOT NULL DEFAULT 0,
    created_ms       INTEGER NOT NULL,
    last_active_ms   INTEGER NOT NULL
);

CREATE TABLE streams (
    id          TEXT PRIMARY KEY,
    session_id  TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    kind        TEXT    NOT NULL CHECK (kind IN ('request', 'standalone')),
    request_id  TEXT,
    state       TEXT    NOT NULL DEFAULT 'active',
    created_ms  INTEGER NOT NULL,
    ended_ms    INTEGER
);
CREATE INDEX streams_by_session ON streams(session_id);
CREATE INDEX streams_by_end ON streams(ended_ms);

CREATE TABLE chunks (
    stream_id  TEXT    NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    message    TEXT    NOT NULL,
    is_end     INTEGER NOT NULL DEFAULT 0,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (stream_id, seq)
) WITHOUT ROWID;

CREATE TABLE logs (
    id         INTEGER PRIMARY KEY,
    ts_ms      INTEGER NOT NULL,
    level      TEXT    NOT NULL,
    session_id TEXT,
    event      TEXT    NOT NULL
);
CREATE INDEX logs_by_time ON logs(ts_ms);
