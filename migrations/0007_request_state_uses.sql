-- The uses of 2026-07-28 requestStates (service/core/request_state.c): one
-- row per state that a request has presented, by the state's nonce, kept
-- until the state expires. A request claims the row first (claim, and the
-- process that did: run); when it answers, done is set and its result is
-- kept in outcome (NULL when too large to keep), so that the same retry
-- sent again (a client that lost the answer) gets the same answer and any
-- other use of the state is refused. answers is a digest of the
-- inputResponses the state was used with.
CREATE TABLE request_state_uses (
    nonce      TEXT    NOT NULL PRIMARY KEY,
    claim      TEXT    NOT NULL,
    run        TEXT    NOT NULL,
    answers    TEXT    NOT NULL,
    expires_ms INTEGER NOT NULL,
    done       INTEGER NOT NULL DEFAULT 0,
    outcome    TEXT
) WITHOUT ROWID;
CREATE INDEX request_state_uses_by_expiry ON request_state_uses(expires_ms);
