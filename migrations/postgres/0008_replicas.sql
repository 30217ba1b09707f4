-- See migrations/0008_replicas.sql: nodes, owners, the inbox and the
-- standalone stream's claim.
ALTER TABLE streams ADD COLUMN owner TEXT;
ALTER TABLE sessions ADD COLUMN owner TEXT;
CREATE INDEX streams_active ON streams(owner) WHERE state = 'active';
CREATE TABLE nodes (
    run        TEXT    NOT NULL PRIMARY KEY,
    started_ms BIGINT  NOT NULL,
    beat_ms    BIGINT  NOT NULL,
    inflight   BIGINT  NOT NULL DEFAULT 0
);
CREATE TABLE inbox (
    id         BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id TEXT    NOT NULL,
    message    TEXT    NOT NULL,
    created_ms BIGINT  NOT NULL
);
CREATE INDEX inbox_by_time ON inbox(created_ms);
CREATE TABLE standalone_claims (
    session_id  TEXT    NOT NULL PRIMARY KEY,
    run         TEXT    NOT NULL,
    until_ms    BIGINT  NOT NULL
);
