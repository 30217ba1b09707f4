-- Whether the process of run r lives: it has beaten since `since` and it
-- still holds its run's advisory lock (taken for the process's life on a
-- connection of its own, store.c). A process that dies (a crash, SIGKILL)
-- loses its connection and the lock with it at once, so another process
-- takes over its calls and sessions then, not a lease later; the beat
-- catches a process that hangs, or whose host vanished without closing
-- its connections. The key: 'mcpd' (0x6d637064) and the run's hashtext,
-- in this database.
CREATE FUNCTION mcpd_run_alive(r text, since bigint) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM nodes n WHERE n.run = r AND n.beat_ms >= since)
       AND EXISTS (SELECT 1 FROM pg_locks l
                   WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
                     AND l.classid = 1835233380 AND l.objid = hashtext(r)::oid
                     AND l.database = (SELECT oid FROM pg_database
                                       WHERE datname = current_database()))
$$;
