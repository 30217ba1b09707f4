-- PostgreSQL only (migrations/postgres/0009_run_alive.sql): a function that
-- tells a live process from a dead one by its advisory lock. SQLite serves
-- one process; nothing to add.
SELECT 1;
