-- The DPoP proofs spent (migrations/0010_dpop_uses.sql): by proof, until
-- the proof's time window has passed, shared by every replica.
CREATE TABLE dpop_uses (
    proof      TEXT   NOT NULL PRIMARY KEY,
    expires_ms BIGINT NOT NULL
);
CREATE INDEX dpop_uses_by_expiry ON dpop_uses(expires_ms);
