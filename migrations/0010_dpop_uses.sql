-- The DPoP proofs spent (service/core/auth.c, RFC 9449 11.1): one row per
-- proof a request was admitted with, by its use (proof: a digest of the key's
-- thumbprint and the proof's jti), kept until the proof's time window has
-- passed. In the store rather than only in a process's memory, so that a
-- proof is refused when replayed to another replica or after a restart.
CREATE TABLE dpop_uses (
    proof      TEXT    NOT NULL PRIMARY KEY,
    expires_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX dpop_uses_by_expiry ON dpop_uses(expires_ms);
