-- The PostgreSQL dialect of migrations/0001..0007 as they stand, at
-- version 7: the same tables, columns and meanings. Times are ms since the
-- epoch (BIGINT). Streams and chunks are keyed as in SQLite, so the purge
-- range-scans the time-ordered stream ids.
CREATE TABLE sessions (
    id               TEXT    PRIMARY KEY,
    protocol_version TEXT    NOT NULL,
    init_params      TEXT    NOT NULL,
    log_level        TEXT    NOT NULL DEFAULT 'debug',
    initialized      INTEGER NOT NULL DEFAULT 0,
    created_ms       BIGINT  NOT NULL,
    last_active_ms   BIGINT  NOT NULL,
    deleted_ms       BIGINT,
    principal        TEXT,
    transport        TEXT,
    kill_reason      TEXT
);
CREATE INDEX sessions_by_deleted ON sessions(deleted_ms);
CREATE INDEX sessions_by_principal ON sessions(principal) WHERE deleted_ms IS NULL;

CREATE TABLE streams (
    id          TEXT    PRIMARY KEY COLLATE "C",
    session_id  TEXT    NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
    kind        TEXT    NOT NULL CHECK (kind IN ('request', 'standalone')),
    request_id  TEXT,
    state       TEXT    NOT NULL DEFAULT 'active',
    created_ms  BIGINT  NOT NULL,
    ended_ms    BIGINT,
    relayed     BIGINT
);
CREATE INDEX streams_by_session ON streams(session_id);

CREATE TABLE chunks (
    stream_id  TEXT    NOT NULL REFERENCES streams(id) ON DELETE CASCADE,
    seq        BIGINT  NOT NULL,
    message    TEXT    NOT NULL,
    is_end     INTEGER NOT NULL DEFAULT 0,
    created_ms BIGINT  NOT NULL,
    PRIMARY KEY (stream_id, seq)
);

CREATE TABLE logs (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ts_ms      BIGINT  NOT NULL,
    level      TEXT    NOT NULL,
    session_id TEXT,
    event      TEXT    NOT NULL
);
CREATE INDEX logs_by_time ON logs(ts_ms);

CREATE TABLE tokens (
    name         TEXT    NOT NULL PRIMARY KEY,
    hash         TEXT    NOT NULL UNIQUE,
    note         TEXT,
    created_ms   BIGINT  NOT NULL,
    expires_ms   BIGINT,
    revoked_ms   BIGINT,
    last_used_ms BIGINT
);

CREATE TABLE secrets (
    name       TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    created_ms BIGINT  NOT NULL
);

CREATE TABLE request_state_uses (
    nonce      TEXT    NOT NULL PRIMARY KEY,
    claim      TEXT    NOT NULL,
    run        TEXT    NOT NULL,
    answers    TEXT    NOT NULL,
    expires_ms BIGINT  NOT NULL,
    done       INTEGER NOT NULL DEFAULT 0,
    outcome    TEXT
);
CREATE INDEX request_state_uses_by_expiry ON request_state_uses(expires_ms);
