-- A deleted session stays as a tombstone until the reaper purges it, so a
-- request that raced the DELETE can still write its stream (to be purged
-- with it) instead of failing a foreign key.
ALTER TABLE sessions ADD COLUMN deleted_ms INTEGER;
