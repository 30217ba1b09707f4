-- Keys the server generates once and keeps across restarts, e.g. the HMAC
-- key that makes a 2026-07-28 requestState tamper-evident (so a state
-- handed out before a restart still verifies after it). Hex text.
CREATE TABLE secrets (
    name       TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    created_ms INTEGER NOT NULL
);
